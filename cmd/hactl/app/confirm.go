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
// terminal and --yes is missing (hint is appended to that error, e.g. ", or --dry-run ...").
func confirmer(s Streams, yes bool, hint string) (func(string) (bool, error), error) {
	if yes {
		return nil, nil
	}
	f, ok := s.In.(*os.File)
	if !ok || !isTerminal(f) {
		return nil, &UsageError{Err: errors.New("this command asks for confirmation and stdin is not a terminal: pass --yes to confirm" + hint)}
	}
	r := bufio.NewReader(f)
	return func(q string) (bool, error) {
		fmt.Fprintf(s.Err, "%s [y/N]: ", q)
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			return false, err
		}
		a := strings.ToLower(strings.TrimSpace(line))
		return a == "y" || a == "yes", nil
	}, nil
}
