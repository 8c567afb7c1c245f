package app

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hactl/hactl/provision"
)

// terminalPrompter returns a Prompter reading secrets from in with echo off, writing the prompt to
// out, when in is a terminal; nil otherwise (then nothing is ever asked, and a missing secret is
// an error saying which environment variable to set).
func terminalPrompter(in io.Reader, out io.Writer) provision.Prompter {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return nil // not a terminal
	}
	var mu sync.Mutex
	r := bufio.NewReader(f)
	return func(prompt string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return nil, fmt.Errorf("reading a secret from the terminal: %w", err)
		}
		noEcho := *old
		noEcho.Lflag &^= unix.ECHO
		noEcho.Lflag |= unix.ICANON | unix.ISIG
		if err := unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho); err != nil {
			return nil, fmt.Errorf("reading a secret from the terminal: %w", err)
		}
		defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
		fmt.Fprint(out, prompt)
		line, err := r.ReadString('\n')
		fmt.Fprintln(out)
		if err != nil && line == "" {
			return nil, fmt.Errorf("reading a secret from the terminal: %w", err)
		}
		return []byte(strings.TrimRight(line, "\r\n")), nil
	}
}

// isTerminal reports whether f is a terminal (not merely a character device: /dev/null is one).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
