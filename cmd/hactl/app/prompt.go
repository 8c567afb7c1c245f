package app

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"

	"github.com/hactl/hactl/provision"
)

// terminalFD returns the file descriptor of in when in is an *os.File open on a terminal
// (term.IsTerminal: a character device that is not a terminal, such as /dev/null, is none), and
// false otherwise. It is the one terminal check of the commands: the secret prompter and the y/N
// confirmation both use it, on every platform.
func terminalFD(in io.Reader) (int, bool) {
	f, ok := in.(*os.File)
	if !ok || f == nil {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// terminalPrompter returns a Prompter reading secrets from in with echo off, writing the prompt to
// out, when in is a terminal; nil otherwise (then nothing is ever asked, and a missing secret is
// an error saying which environment variable to set).
//
// Each call writes the prompt, reads one line with echo off (term.ReadPassword: the bytes before
// Enter, without "\r" or "\n"; the terminal's mode is restored afterwards), then writes a newline
// to out, since the user's Enter was not echoed. Ctrl-D does not end the line (ReadPassword reads
// on); Ctrl-C interrupts as anywhere else. Calls are serialised, so concurrent SSH dials never ask
// at once. The error wraps the terminal's read or mode-change error (e.g. EIO once the terminal
// is gone).
func terminalPrompter(in io.Reader, out io.Writer) provision.Prompter {
	fd, ok := terminalFD(in)
	if !ok {
		return nil
	}
	var mu sync.Mutex
	return func(prompt string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(out, prompt)
		secret, err := term.ReadPassword(fd)
		fmt.Fprintln(out)
		if err != nil {
			return nil, fmt.Errorf("reading a secret from the terminal: %w", err)
		}
		return secret, nil
	}
}
