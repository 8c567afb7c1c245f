package fault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"text/template"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// HostData is what a host command template sees of a host.
type HostData struct {
	// Host is the host's name in the spec (spec.hosts[].name), Address its address, Zone its zone.
	Host, Address, Zone string
}

// hostFields describes the template's fields for error messages.
const hostFields = "{{.Host}} (the host's name in the spec), {{.Address}} (its address), {{.Zone}} (its zone)"

// HostCommand is an operator-supplied command template run on this machine to take a host down
// or bring it back (drill --method host), e.g. `docker kill hactl-lab-{{.Host}}`.
type HostCommand struct {
	// Flag is the flag the template came from (for error messages), Text the template.
	Flag, Text string
	tmpl       *template.Template
}

// ParseHostCommand parses text, the value of flag (e.g. "--down"), as a text/template over
// [HostData] and executes it once against sample data, so that a syntax error, an unknown field
// (e.g. {{.Hostname}}) or a template that names no field at all (it would run the same command
// for every host) is reported before any host is contacted. The error names the flag and the
// fields available.
func ParseHostCommand(flag, text string) (*HostCommand, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("%s: empty command; use a shell command with %s", flag, hostFields)
	}
	t, err := template.New(flag).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w; the fields are %s", flag, text, err, hostFields)
	}
	c := &HostCommand{Flag: flag, Text: text, tmpl: t}
	a, err := c.Render(HostData{Host: "cp-a", Address: "192.0.2.10", Zone: "az-a"})
	if err != nil {
		return nil, err
	}
	b, err := c.Render(HostData{Host: "lb-b", Address: "198.51.100.20", Zone: "az-b"})
	if err != nil {
		return nil, err
	}
	if a == b {
		return nil, fmt.Errorf("%s %q: names no host field, so it would run the same command for every host; use %s", flag, text, hostFields)
	}
	return c, nil
}

// Render returns the command for host d. Every field is inserted shell-quoted
// (shell.Quote: unchanged when made of [A-Za-z0-9_@%+=:,./-], else in single quotes),
// so a value is always one word, also next to other text (hactl-lab-{{.Host}}): templates must
// not quote fields themselves.
func (c *HostCommand) Render(d HostData) (string, error) {
	q := HostData{Host: shell.Quote(d.Host), Address: shell.Quote(d.Address), Zone: shell.Quote(d.Zone)}
	var b strings.Builder
	if err := c.tmpl.Execute(&b, q); err != nil {
		return "", fmt.Errorf("%s %q: %w; the fields are %s", c.Flag, c.Text, err, hostFields)
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", fmt.Errorf("%s %q: renders an empty command for host %s", c.Flag, c.Text, d.Host)
	}
	return b.String(), nil
}

// String returns the template text.
func (c *HostCommand) String() string { return c.Text }

// localWaitDelay bounds how long RunLocal waits for the output pipe after the shell exited or
// was killed (a background child may hold it open).
const localWaitDelay = 5 * time.Second

// maxErrOutput bounds the output quoted in RunLocal's error (the tail is kept).
const maxErrOutput = 2 << 10

// RunLocal runs command with `/bin/sh -c` on this machine, stdin empty, and returns its combined
// standard output and error. When ctx is done the shell and everything it started (its process
// group) get SIGKILL. A failure returns the output so far and an error naming the command,
// wrapping the *exec.ExitError (or start error) and, when ctx ended it, ctx's error — with %w.
func RunLocal(ctx context.Context, command string) (string, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	ownProcessGroup(cmd)
	cmd.WaitDelay = localWaitDelay
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	s := out.String()
	if err == nil {
		return s, nil
	}
	if cerr := context.Cause(ctx); cerr != nil && ctx.Err() != nil {
		err = errors.Join(err, cerr)
	}
	tail := strings.TrimSpace(s)
	if len(tail) > maxErrOutput {
		tail = "..." + tail[len(tail)-maxErrOutput:]
	}
	if tail != "" {
		return s, fmt.Errorf("local command %q: %w; output:\n%s", command, err, tail)
	}
	return s, fmt.Errorf("local command %q: %w", command, err)
}
