// Package shell quotes words for the POSIX shell that runs hactl's remote commands (and the commands
// its messages suggest). It is the one quoting function of the module: every command line hactl
// builds goes through Quote or Join.
package shell

import "strings"

// Quote quotes s as one word for a POSIX shell. Strings made only of safe characters
// ([A-Za-z0-9_@%+=:,./-], not empty) are returned unchanged; anything else is wrapped in single
// quotes, an embedded single quote being closed, backslash-escaped and reopened (POSIX.1-2017, Shell
// Command Language, 2.2.3: nothing is special inside single quotes but the quote itself):
//
//	Quote("/etc/etcd")  == "/etc/etcd"
//	Quote("a b")        == "'a b'"
//	Quote("it's")       == `'it'\''s'`
//	Quote("")           == "''"
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes every word with Quote and joins them with single spaces: one command line, or the
// word list of a `for` loop. No words give "".
func Join(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}
