//go:build linux || darwin

package app

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/hactl/hactl/provision"
)

// ptyTerminal is a pseudo-terminal: the program under test gets slave as its stdin and stderr,
// the test types into master as a keyboard would and reads what the terminal shows.
type ptyTerminal struct {
	master, slave *os.File

	mu      sync.Mutex
	shown   bytes.Buffer  // everything read from master so far
	changed chan struct{} // closed and replaced whenever shown grows
	seen    int           // where the next waitFor starts looking in shown
}

// openPTY opens a pseudo-terminal and copies what it shows into the ptyTerminal until the test
// ends (the cleanup closes both sides).
func openPTY(t *testing.T) *ptyTerminal {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	p := &ptyTerminal{master: master, slave: slave, changed: make(chan struct{})}
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.shown.Write(buf[:n])
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		slave.Close()
		master.Close()
	})
	return p
}

// waitFor waits until the terminal shows text after what earlier calls found, and returns what
// it showed from there up to and including text. The minute is a guard against a hang, not a
// timing assertion.
func (p *ptyTerminal) waitFor(t *testing.T, text string) string {
	t.Helper()
	guard := time.After(time.Minute)
	for {
		p.mu.Lock()
		rest, changed := p.shown.String()[p.seen:], p.changed
		if i := strings.Index(rest, text); i >= 0 {
			p.seen += i + len(text)
			p.mu.Unlock()
			return rest[:i+len(text)]
		}
		p.mu.Unlock()
		select {
		case <-changed:
		case <-guard:
			t.Fatalf("the terminal never showed %q; after the last match it shows %q", text, rest)
		}
	}
}

// typeText writes s into the terminal as if typed.
func (p *ptyTerminal) typeText(t *testing.T, s string) {
	t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		t.Fatalf("typing %q: %v", s, err)
	}
}

// echoing reports whether the terminal echoes what is typed (ECHO in its local modes).
func (p *ptyTerminal) echoing(t *testing.T) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(p.slave.Fd()), ioctlGetTermios)
	if err != nil {
		t.Fatalf("reading the terminal's modes: %v", err)
	}
	return tio.Lflag&unix.ECHO != 0
}

// waitEchoOff waits until the program has turned echo off: typing earlier would be echoed by the
// terminal before the program asked it not to, whatever the program does. The minute is a guard
// against a hang, not a timing assertion.
func (p *ptyTerminal) waitEchoOff(t *testing.T) {
	t.Helper()
	guard := time.Now().Add(time.Minute)
	for p.echoing(t) {
		if time.Now().After(guard) {
			t.Fatal("the prompter never turned the terminal's echo off")
		}
		time.Sleep(time.Millisecond)
	}
}

// answerSecret calls prompt(text) and, once the terminal shows text and echo is off, types each
// of typed in turn; it returns what prompt returned.
func (p *ptyTerminal) answerSecret(t *testing.T, prompt provision.Prompter, text string, typed ...string) ([]byte, error) {
	t.Helper()
	type answer struct {
		secret []byte
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		s, err := prompt(text)
		got <- answer{s, err}
	}()
	p.waitFor(t, text)
	p.waitEchoOff(t)
	for _, s := range typed {
		p.typeText(t, s)
	}
	a := <-got
	return a.secret, a.err
}

// TestTerminalPrompterOnPTY asks for two secrets and confirmations through a real terminal: the
// prompt is shown, the typed secret is returned without its line end and is never echoed, the
// terminal echoes again afterwards, and y/n/empty answers read through the same terminal.
func TestTerminalPrompterOnPTY(t *testing.T) {
	term := openPTY(t)
	if !term.echoing(t) {
		t.Fatal("a new pseudo-terminal does not echo: the test cannot tell echo off from the start")
	}
	prompt := terminalPrompter(term.slave, term.slave)
	if prompt == nil {
		t.Fatal("terminalPrompter on a pseudo-terminal returned nil: no prompt would be shown")
	}
	ask := func(text, typed, want string) {
		t.Helper()
		secret, err := term.answerSecret(t, prompt, text, typed)
		if err != nil {
			t.Fatalf("prompt %q: %v", text, err)
		}
		if string(secret) != want {
			t.Errorf("prompt %q returned %q, want %q", text, secret, want)
		}
		// The newline printed after the unechoed Enter; an echo of the secret would precede it.
		if shown := term.waitFor(t, "\r\n"); strings.Contains(shown, want) {
			t.Errorf("the secret was echoed: after the prompt the terminal showed %q", shown)
		}
		if !term.echoing(t) {
			t.Errorf("echo is still off after prompt %q: the terminal's mode was not restored", text)
		}
	}
	ask("SSH key passphrase for cp-a: ", "s3cr3t pass\n", "s3cr3t pass")
	ask("sudo password for cp-b: ", "p@ss\r", "p@ss") // Enter on a real keyboard sends CR

	confirm, err := confirmer(Streams{In: term.slave, Err: term.slave}, false, "")
	if err != nil || confirm == nil {
		t.Fatalf("confirmer on a terminal: %v (nil question: %v)", err, confirm == nil)
	}
	for _, c := range []struct {
		typed string
		want  bool
	}{{"y\n", true}, {"n\n", false}, {"\n", false}, {" YES \n", true}, {"yep\n", false}} {
		type confirmed struct {
			ok  bool
			err error
		}
		got := make(chan confirmed, 1)
		go func() {
			ok, err := confirm("delete 3 snapshot(s)?")
			got <- confirmed{ok, err}
		}()
		term.waitFor(t, "delete 3 snapshot(s)? [y/N]: ")
		term.typeText(t, c.typed)
		a := <-got
		if a.err != nil {
			t.Fatalf("answer %q: %v", c.typed, a.err)
		}
		if a.ok != c.want {
			t.Errorf("answer %q: confirmed %v, want %v", c.typed, a.ok, c.want)
		}
		// Echo is on for answers: the terminal shows what was typed.
		term.waitFor(t, strings.TrimRight(c.typed, "\n")+"\r\n")
	}
	// A secret prompt after the confirmations still reads the next line only.
	ask("SSH key passphrase for cp-c: ", "third\n", "third")
}

// TestTerminalPrompterIgnoresEOF: Ctrl-D on an empty line does not end the prompt with an empty
// secret (term.ReadPassword reads on); the next line typed is the secret.
func TestTerminalPrompterIgnoresEOF(t *testing.T) {
	term := openPTY(t)
	prompt := terminalPrompter(term.slave, term.slave)
	if prompt == nil {
		t.Fatal("terminalPrompter on a pseudo-terminal returned nil")
	}
	// VEOF on an empty line (the read returns nothing), then a line.
	if secret, err := term.answerSecret(t, prompt, "passphrase: ", "\x04", "after-eof\r"); err != nil || string(secret) != "after-eof" {
		t.Errorf("Ctrl-D, then a line: secret %q, error %v; want the line", secret, err)
	}
}
