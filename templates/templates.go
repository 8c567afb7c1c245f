// Package templates holds hactl's embedded text templates (etcd.service.tmpl; later haproxy and
// keepalived) and renders them from typed data.
package templates

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// FS holds every template, by file name.
//
//go:embed *.tmpl
var FS embed.FS

// Render executes the template file name (e.g. "etcd.service.tmpl") with data. Templates are parsed
// with Funcs and missingkey=error, so a missing map key is an error rather than "<no value>".
// Errors name the template.
func Render(name string, data any) ([]byte, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(Funcs()).ParseFS(FS, name)
	if err != nil {
		return nil, fmt.Errorf("parse template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("render template %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// Funcs are the functions available in every template:
//
//	join LIST SEP       strings.Join
//	systemdArg S        S as one word of a systemd command line (see SystemdArg)
//	flag NAME VALUE     "--NAME=VALUE" as one word of a systemd command line; VALUE is formatted with %v
func Funcs() template.FuncMap {
	return template.FuncMap{
		"join":       strings.Join,
		"systemdArg": SystemdArg,
		"flag": func(name string, value any) (string, error) {
			return SystemdArg(fmt.Sprintf("--%s=%v", name, value))
		},
	}
}

// SystemdArg returns s as a single word of a systemd unit command line (ExecStart=, see
// systemd.service(5) "Command lines" and systemd.unit(5) "Specifiers"): "%" is written "%%" and "$"
// is written "$$" so neither is expanded; a word containing whitespace, quotes or backslashes (or an
// empty word) is wrapped in double quotes with backslash and double quote escaped. Control characters
// (including newlines) are an error.
func SystemdArg(s string) (string, error) {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("systemd argument %q contains a control character", s)
		}
	}
	s = strings.NewReplacer("%", "%%", "$", "$$").Replace(s)
	if s != "" && !strings.ContainsAny(s, " \"'\\;") {
		return s, nil
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, nil
}
