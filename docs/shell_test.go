package docs

import (
	"regexp"
	"strings"
)

// word is one shell word of a documented command line.
type word struct {
	text   string
	quoted bool // some of it was quoted: no placeholder, variable or alternation reading
}

// shellCommands splits one logical shell line (continuations already joined) into its simple
// commands: words separated by unquoted `;`, `&&`, `||`, `&` and a `|` that stands alone (a `|`
// inside a word, "config|deploy", is the docs' alternation and stays in the word). A `#` opening a
// word starts a comment; redirections (`> f`, `2>&1`, `< f`) are dropped with their target.
func shellCommands(line string) [][]word {
	var (
		cmds   [][]word
		cur    []word
		w      strings.Builder
		inWord bool
		quoted bool
		depth  int // inside $( ... )
	)
	flush := func() {
		if inWord {
			cur = append(cur, word{text: w.String(), quoted: quoted})
		}
		w.Reset()
		inWord, quoted = false, false
	}
	end := func() {
		flush()
		if len(cur) > 0 {
			cmds = append(cmds, dropRedirects(cur))
		}
		cur = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 1
		case c == '\\' && i+1 < len(line):
			w.WriteByte(line[i+1])
			inWord = true
			i++
		case depth > 0:
			if c == ')' {
				depth--
			}
			w.WriteByte(c)
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			depth++
			w.WriteString("$(")
			inWord = true
			i++
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			end()
			return cmds
		case c == ';':
			end()
		case c == '&':
			if inWord && strings.HasSuffix(w.String(), ">") { // 2>&1
				w.WriteByte(c)
				continue
			}
			end()
			if i+1 < len(line) && line[i+1] == '&' {
				i++
			}
		case c == '|' && (!inWord || i+1 < len(line) && line[i+1] == '|'):
			end()
			if i+1 < len(line) && line[i+1] == '|' {
				i++
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	end()
	return cmds
}

// redirectRE matches a redirection word: its operator, and its target when attached (">f", "2>&1").
var redirectRE = regexp.MustCompile(`^[0-9]*(>>?|<)(&?[0-9]+|.*)$`)

// dropRedirects removes redirections and their targets from a simple command.
func dropRedirects(ws []word) []word {
	var out []word
	for i := 0; i < len(ws); i++ {
		m := redirectRE.FindStringSubmatch(ws[i].text)
		if ws[i].quoted || m == nil {
			out = append(out, ws[i])
			continue
		}
		if m[2] == "" {
			i++ // the target is the next word
		}
	}
	return out
}

// assignmentRE matches a shell variable assignment word.
var assignmentRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// hactlArgs returns the arguments of cmd when it runs hactl (`hactl …`, `bin/hactl …`, after
// environment assignments and `sudo`), else ok false. A command made only of assignments sets vars
// (the block's variables, `F='-f cluster.yaml'`), whose unquoted `$NAME` and `${NAME}` later
// commands split into words as the shell does.
func hactlArgs(cmd []word, vars map[string]string) (args []word, ok bool) {
	i := 0
	for i < len(cmd) {
		m := assignmentRE.FindStringSubmatch(cmd[i].text)
		if m == nil {
			break
		}
		if len(cmd) == 1 && vars != nil {
			vars[m[1]] = m[2]
		}
		i++
	}
	for i < len(cmd) && (cmd[i].text == "sudo" || cmd[i].text == "time" || cmd[i].text == "env" || cmd[i].text == "$") {
		i++
	}
	if i == len(cmd) || (cmd[i].text != "hactl" && !strings.HasSuffix(cmd[i].text, "/hactl")) {
		return nil, false
	}
	for _, w := range cmd[i+1:] {
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(w.text, "$"), "{"), "}")
		if v, set := vars[name]; set && !w.quoted && strings.HasPrefix(w.text, "$") {
			for _, f := range strings.Fields(v) {
				args = append(args, word{text: f})
			}
			continue
		}
		args = append(args, w)
	}
	return args, true
}

// placeholderRE matches what the docs write for a value the reader chooses: `<name>`, `NAME`,
// `KEY`, `N`, `...`, `…`, an unset `$VAR`.
var placeholderRE = regexp.MustCompile(`^(.*<[^>]*>.*|[A-Z][A-Z0-9_]*|.*\.\.\..*|.*….*|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)$`)

// isPlaceholder reports whether w is a placeholder (placeholderRE, never a quoted word).
func isPlaceholder(w word) bool { return !w.quoted && placeholderRE.MatchString(w.text) }

// alternatives expands the docs' notation of a command line into the lines it stands for:
// `[...]` marks optional words, which are taken (brackets dropped), and `a|b` inside a word gives
// one line per alternative. At most 64 lines.
func alternatives(args []word) [][]word {
	lines := [][]word{nil}
	for _, w := range args {
		opts := []word{w}
		if !w.quoted {
			t := strings.TrimSuffix(strings.TrimPrefix(w.text, "["), "]")
			opts = nil
			for _, alt := range strings.Split(t, "|") {
				opts = append(opts, word{text: alt})
			}
		}
		var next [][]word
		for _, l := range lines {
			for _, o := range opts {
				if len(next) == 64 {
					break
				}
				next = append(next, append(append([]word(nil), l...), o))
			}
		}
		lines = next
	}
	return lines
}
