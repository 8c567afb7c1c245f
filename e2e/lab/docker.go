package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// LogFunc receives one formatted log line (printf style), e.g. testing.T.Logf or log.Printf.
type LogFunc func(format string, args ...any)

func (f LogFunc) printf(format string, args ...any) {
	if f != nil {
		f(format, args...)
	}
}

// CommandError is a failed docker (or other local) command: the full argument list, its standard
// error and the underlying error (usually *exec.ExitError, or the context's error).
type CommandError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("%s: %v", shell.Join(e.Args...), e.Err)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// docker runs the docker CLI, logging every command (shell-quoted, so it can be replayed by hand)
// to debugf before it runs.
type docker struct {
	debugf LogFunc
}

// run runs `docker args...` with stdin (may be nil) and returns its standard output.
func (d docker) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return runCmd(ctx, d.debugf, stdin, "docker", args...)
}

// DefaultCommandTimeout bounds a docker (or other local) command whose context has no deadline of
// its own: a daemon that stops answering fails the caller with the command line instead of hanging
// the test binary past go test's own timeout (which does not cover TestMain's lab up and down).
// The longest commands the lab runs, a cold debootstrap of an image and a cold `docker build` of the
// kind node image, take a few minutes on a 2-CPU machine.
const DefaultCommandTimeout = 20 * time.Minute

// runCmd runs name args... and returns its standard output; failures are *CommandError.
func runCmd(ctx context.Context, debugf LogFunc, stdin io.Reader, name string, args ...string) (string, error) {
	full := append([]string{name}, args...)
	debugf.printf("$ %s", shell.Join(full...))
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCommandTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin = stdin
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(ctxErr, err)
		}
		return stdout.String(), &CommandError{Args: full, Stderr: stderr.String(), Err: err}
	}
	return stdout.String(), nil
}
