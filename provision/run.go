package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// killGrace is how long Run waits for a killed command's session to wind down
// before returning anyway.
const killGrace = 5 * time.Second

// Result is the outcome of a remote command.
type Result struct {
	// Stdout and Stderr are the command's complete output (the sudo
	// password, should it ever appear in Stderr, replaced by "[sudo
	// password]").
	Stdout, Stderr []byte
	// ExitCode is the exit status; 128+n when killed by signal n; -1 when
	// unknown (the command did not finish, or the connection failed).
	ExitCode int
	// Duration is the wall time from opening the session to the result.
	Duration time.Duration
}

// RunOption configures one [Client.Run] call.
type RunOption func(*runOptions)

type runOptions struct {
	stdin  io.Reader
	stdout io.Writer
}

// WithStdin feeds r to the command's standard input; the input is closed at
// EOF of r. Without it the command reads an empty stdin. Run waits until r is
// drained or the command exits, so r must not block forever.
func WithStdin(r io.Reader) RunOption {
	return func(o *runOptions) { o.stdin = r }
}

// WithStdout also writes the command's standard output to w while the
// command runs, each chunk as it arrives from the host (chunks follow the SSH
// channel's packets, not lines: a line may be split across calls);
// Result.Stdout still holds all of it. It is meant for long-running commands
// whose output is read as it comes, such as a remote watcher printing a line
// per event.
//
// w is called from the SSH session's copying goroutine (not the caller's),
// one call at a time, and never after Run returns. While a call is in
// progress the command's output is not read, so w must not block for long: a
// stalled w holds up the command (through SSH flow control) and Run's return,
// which waits for a call in progress. w's errors and short writes do not fail
// the command: after the first one, w is no longer called.
func WithStdout(w io.Writer) RunOption {
	return func(o *runOptions) { o.stdout = w }
}

// CommandError is returned by [Client.Run] (and wrapped by Upload) when a
// command exits non-zero, is killed, times out or cannot be run.
type CommandError struct {
	// Host is the target's name; Step the caller's step name (e.g.
	// "etcd/start"); Command the command as given to Run (not the wrapped
	// remote command line).
	Host, Step, Command string
	// ExitCode is the exit status, 128+n if killed by signal n, -1 if the
	// command did not finish (timeout, cancellation, connection failure).
	ExitCode int
	// Stderr is the command's standard error, trimmed of surrounding
	// white space.
	Stderr string
	// Err is the cause: a *ssh.ExitError for a non-zero exit, a context
	// error on timeout/cancellation, or a transport error.
	Err error
}

// maxErrorStderr bounds the stderr quoted by CommandError.Error; the tail is
// kept (the last lines usually say what went wrong). The field keeps it all.
const maxErrorStderr = 8 << 10

// maxErrorCommand bounds the command quoted by CommandError.Error.
const maxErrorCommand = 512

func (e *CommandError) Error() string {
	return fmt.Sprintf("host %s: step %s: %s", e.Host, e.Step, e.detail())
}

// detail is the message without host and step.
func (e *CommandError) detail() string {
	var b strings.Builder
	cmd := e.Command
	if len(cmd) > maxErrorCommand {
		cmd = cmd[:maxErrorCommand] + "..."
	}
	fmt.Fprintf(&b, "command %q ", cmd)
	var exit *ssh.ExitError
	switch {
	case errors.Is(e.Err, context.DeadlineExceeded):
		fmt.Fprintf(&b, "timed out and was killed: %v", e.Err)
	case errors.Is(e.Err, context.Canceled):
		fmt.Fprintf(&b, "was cancelled and killed: %v", e.Err)
	case errors.As(e.Err, &exit) && exit.Signal() != "":
		fmt.Fprintf(&b, "was killed by signal %s (exit code %d)", exit.Signal(), e.ExitCode)
	case errors.As(e.Err, &exit):
		fmt.Fprintf(&b, "exited with code %d", e.ExitCode)
	case e.Err != nil:
		fmt.Fprintf(&b, "failed: %v", e.Err)
	default:
		fmt.Fprintf(&b, "exited with code %d", e.ExitCode)
	}
	if s := e.Stderr; s != "" {
		if len(s) > maxErrorStderr {
			s = fmt.Sprintf("[%d bytes omitted] ...%s", len(s)-maxErrorStderr, s[len(s)-maxErrorStderr:])
		}
		b.WriteString("; stderr:\n")
		b.WriteString(s)
	}
	return b.String()
}

func (e *CommandError) Unwrap() error { return e.Err }

// Run runs command on the host with /bin/sh and LC_ALL=C, as root (through
// sudo for a non-root user, see [Client.Privilege]), and returns its output
// and exit status. step names the caller's step for errors and logs. The sudo
// password, when one is needed, is written to the command's standard input
// ahead of WithStdin's reader and read by sudo; it never appears on the
// command line, and is replaced by "[sudo password]" in Stderr and errors.
//
// ctx carries the step's deadline: when it is done, the remote command is
// sent SIGKILL, its session is closed, and Run returns a *CommandError
// wrapping the context's error (context.DeadlineExceeded or
// context.Canceled). A non-zero exit, a signal, or a transport failure also
// returns a *CommandError; the Result holds whatever output arrived in all
// cases.
func (c *Client) Run(ctx context.Context, step, command string, opts ...RunOption) (Result, error) {
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	cmdErr := func(res Result, err error) (Result, error) {
		res.Duration = time.Since(start)
		return res, &CommandError{
			Host:     c.target.Name,
			Step:     step,
			Command:  command,
			ExitCode: res.ExitCode,
			Stderr:   strings.TrimSpace(string(res.Stderr)),
			Err:      err,
		}
	}
	if err := ctx.Err(); err != nil {
		return cmdErr(Result{ExitCode: -1}, fmt.Errorf("not started: %w", context.Cause(ctx)))
	}

	sess, err := c.newSession(ctx)
	if err != nil {
		return cmdErr(Result{ExitCode: -1}, fmt.Errorf("open session: %w", err))
	}
	defer sess.Close()
	var stdout, stderr lockedBuffer
	sess.Stdout = &stdout
	sess.Stderr = &stderr
	if o.stdout != nil {
		tee := &teeWriter{buf: &stdout, w: o.stdout}
		defer tee.detach()
		sess.Stdout = tee
	}
	line, prefix := c.remoteCommand(command)
	sess.Stdin = o.stdin
	if prefix != nil {
		stdin := o.stdin
		if stdin == nil {
			stdin = bytes.NewReader(nil)
		}
		sess.Stdin = io.MultiReader(bytes.NewReader(prefix), stdin)
	}
	c.commands.Add(1)
	if err := sess.Start(line); err != nil {
		return cmdErr(Result{ExitCode: -1}, fmt.Errorf("start: %w", c.connErr(err)))
	}

	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Best effort: servers that ignore "signal" still see the channel
		// close (OpenSSH then closes the command's pipes).
		_ = sess.Signal(ssh.SIGKILL)
		_ = sess.Close()
		select {
		case <-done:
		case <-time.After(killGrace):
		}
		res := Result{Stdout: stdout.Bytes(), Stderr: c.scrub(stderr.Bytes()), ExitCode: -1}
		return cmdErr(res, fmt.Errorf("after %s: %w", time.Since(start).Round(time.Millisecond), context.Cause(ctx)))
	}

	res := Result{Stdout: stdout.Bytes(), Stderr: c.scrub(stderr.Bytes()), Duration: time.Since(start)}
	if err == nil {
		return res, nil
	}
	var exit *ssh.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitStatus()
		return cmdErr(res, err)
	}
	res.ExitCode = -1
	return cmdErr(res, c.connErr(err))
}

// newSession opens a session channel, giving up when ctx is done.
func (c *Client) newSession(ctx context.Context) (*ssh.Session, error) {
	type opened struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := c.conn.NewSession()
		ch <- opened{s, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, c.connErr(o.err)
		}
		return o.s, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.s != nil {
				o.s.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and a concurrent reader
// (the session's copy goroutines may outlive an abandoned Run).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of the contents.
func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// teeWriter copies the session's stdout into buf and, until detach or w's
// first error, into w. Once detached (when Run returns) w is never called
// again, even by copy goroutines outliving an abandoned session.
type teeWriter struct {
	buf *lockedBuffer

	mu sync.Mutex // held across w.Write, so detach waits for a call in progress
	w  io.Writer  // nil once detached or failed
}

func (t *teeWriter) Write(p []byte) (int, error) {
	n, err := t.buf.Write(p)
	if err != nil {
		return n, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w != nil {
		if m, werr := t.w.Write(p); werr != nil || m != len(p) {
			t.w = nil
		}
	}
	return n, nil
}

func (t *teeWriter) detach() {
	t.mu.Lock()
	t.w = nil
	t.mu.Unlock()
}
