package app

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
)

// confirmer returns how a destructive command asks for confirmation: nil (go ahead) with --yes; a
// y/N question on the terminal; a usage error (before any host is contacted) when stdin is not a
// terminal (terminalFD) and --yes is missing (hint is appended to that error, e.g. ", or --dry-run
// ...").
//
// The question q is written to s.Err as "q [y/N]: " and one line is read from stdin: "y" or "yes"
// in any case, surrounded by blanks or not, is true; anything else, an empty line included, is
// false. The error is the terminal's when stdin ended before any answer (io.EOF). A terminal in
// its usual (canonical) mode hands over one line per read, so the buffered reader never takes
// input meant for a later secret prompt.
func confirmer(s Streams, yes bool, hint string) (func(q string) (bool, error), error) {
	if yes {
		return nil, nil
	}
	if _, ok := terminalFD(s.In); !ok {
		return nil, &UsageError{Err: errors.New("this command asks for confirmation and stdin is not a terminal: pass --yes to confirm" + hint)}
	}
	r := bufio.NewReader(s.In.(*os.File))
	return func(q string) (bool, error) {
		fmt.Fprintf(s.Err, "%s [y/N]: ", q)
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			return false, fmt.Errorf("reading the answer from the terminal: %w", err)
		}
		a := strings.ToLower(strings.TrimSpace(line))
		return a == "y" || a == "yes", nil
	}, nil
}

// confirmOrStop asks question (unless yes) and returns an error when it is not confirmed: a usage
// error when stdin is no terminal (hint says what else to pass), "not confirmed: nothing was
// changed" when the answer is no.
func confirmOrStop(s Streams, yes bool, hint, question string) error {
	confirm, err := confirmer(s, yes, hint)
	if err != nil || confirm == nil {
		return err
	}
	ok, err := confirm(question)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("not confirmed: nothing was changed")
	}
	return nil
}
