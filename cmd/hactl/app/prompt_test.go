package app

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// TestNoTerminal: stdin that is not a terminal (a reader, /dev/null: a character device, a pipe)
// gets no prompter, and a destructive command without --yes is a usage error naming --yes and the
// hint; --yes needs no terminal.
func TestNoTerminal(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for name, in := range map[string]io.Reader{"reader": strings.NewReader("y\n"), "/dev/null": devNull, "pipe": pr, "nil file": (*os.File)(nil)} {
		if p := terminalPrompter(in, &strings.Builder{}); p != nil {
			t.Errorf("%s: terminalPrompter returned a prompter for a non-terminal", name)
		}
		confirm, err := confirmer(Streams{In: in, Err: &strings.Builder{}}, false, ", or --dry-run to only see the plan")
		var ue *UsageError
		if confirm != nil || !errors.As(err, &ue) {
			t.Errorf("%s without --yes: question %v, error %v; want a usage error", name, confirm != nil, err)
		} else if msg := err.Error(); !strings.Contains(msg, "stdin is not a terminal: pass --yes") || !strings.HasSuffix(msg, ", or --dry-run to only see the plan") {
			t.Errorf("%s without --yes: %q, want the --yes advice and the hint", name, msg)
		}
		if confirm, err := confirmer(Streams{In: in}, true, ""); confirm != nil || err != nil {
			t.Errorf("%s with --yes: question %v, error %v; want neither", name, confirm != nil, err)
		}
	}
}
