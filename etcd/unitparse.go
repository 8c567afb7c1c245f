package etcd

import (
	"errors"
	"fmt"
	"strings"
)

// ParseUnitFlags reads back the etcd flags of a unit rendered by RenderUnit: the words of its
// ExecStart= command line (continuation lines joined, systemd double quotes and the "%%" / "$$"
// escapes of templates.SystemdArg undone) that have the form --name=value, as a map from name
// (without the dashes) to value. It is how hactl recovers a member's recorded settings
// (--initial-cluster, --initial-cluster-state, URLs) from the unit installed on a host.
//
// Errors: no ExecStart= line, an unterminated quote, a flag given twice.
func ParseUnitFlags(unit []byte) (map[string]string, error) {
	lines := strings.Split(string(unit), "\n")
	var cmd strings.Builder
	found := false
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t\r")
		if !found {
			rest, ok := strings.CutPrefix(l, "ExecStart=")
			if !ok {
				continue
			}
			found = true
			l = rest
		}
		if cont, ok := strings.CutSuffix(l, `\`); ok {
			cmd.WriteString(cont)
			cmd.WriteByte(' ')
			continue
		}
		cmd.WriteString(l)
		break
	}
	if !found {
		return nil, errors.New("etcd unit: no ExecStart= line")
	}
	words, err := splitSystemdWords(cmd.String())
	if err != nil {
		return nil, fmt.Errorf("etcd unit: ExecStart: %w", err)
	}
	flags := map[string]string{}
	for _, w := range words {
		name, value, ok := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		if !strings.HasPrefix(w, "--") || !ok {
			continue
		}
		if _, dup := flags[name]; dup {
			return nil, fmt.Errorf("etcd unit: flag --%s given twice", name)
		}
		flags[name] = value
	}
	return flags, nil
}

// splitSystemdWords splits a command line into words the way templates.SystemdArg quoted them.
func splitSystemdWords(s string) ([]string, error) {
	unescape := strings.NewReplacer("%%", "%", "$$", "$")
	var words []string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return words, nil
		}
		var w strings.Builder
		if s[i] == '"' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					w.WriteByte(s[i+1])
					i += 2
					continue
				}
				i++
				if c == '"' {
					closed = true
					break
				}
				w.WriteByte(c)
			}
			if !closed {
				return nil, errors.New("unterminated double quote")
			}
		} else {
			for i < len(s) && s[i] != ' ' && s[i] != '\t' {
				w.WriteByte(s[i])
				i++
			}
		}
		words = append(words, unescape.Replace(w.String()))
	}
}
