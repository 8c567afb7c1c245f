package provision_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
)

func TestRun(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	tests := []struct {
		name    string
		command string
		opts    []provision.RunOption
		stdout  string
		stderr  string
	}{
		{name: "echo", command: "echo hello", stdout: "hello\n"},
		{name: "locale", command: `echo "$LC_ALL"`, stdout: "C\n"},
		{name: "stderr", command: "echo oops >&2", stderr: "oops\n"},
		{name: "quotes", command: `printf '%s\n' "it's" 'a "b"'`, stdout: "it's\na \"b\"\n"},
		{name: "stdin", command: "cat; echo end", opts: []provision.RunOption{provision.WithStdin(strings.NewReader("line1\nline2\n"))}, stdout: "line1\nline2\nend\n"},
		{name: "no stdin", command: "cat; echo end", stdout: "end\n"},
		{name: "multi-line", command: "set -e\nx=1\necho $((x+1))", stdout: "2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Run(ctxTimeout(t, 5*time.Second), "test/run", tt.command, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != tt.stdout || string(res.Stderr) != tt.stderr || res.ExitCode != 0 {
				t.Errorf("got stdout %q stderr %q exit %d; want %q %q 0", res.Stdout, res.Stderr, res.ExitCode, tt.stdout, tt.stderr)
			}
			if res.Duration <= 0 {
				t.Errorf("duration %v", res.Duration)
			}
		})
	}
	if got := c.Commands(); got != len(tests)+1 {
		t.Errorf("Commands() = %d, want %d (the connect-time probe and one per Run)", got, len(tests)+1)
	}
	if got := e.srv.Conns(); got != 1 {
		t.Errorf("server saw %d connections, want 1 (one reused connection)", got)
	}
	if c.Target() != e.target() {
		t.Errorf("Target() = %+v", c.Target())
	}
}

func TestRunNonZeroExit(t *testing.T) {
	c := newEnv(t).dial()
	cmd := "echo partial; echo 'etcd: bad flag --foo' >&2; exit 3"
	res, err := c.Run(ctxTimeout(t, 5*time.Second), "etcd/start", cmd)
	var ce *provision.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *CommandError", err, err)
	}
	if ce.Host != "h1" || ce.Step != "etcd/start" || ce.Command != cmd || ce.ExitCode != 3 || ce.Stderr != "etcd: bad flag --foo" || ce.Err == nil {
		t.Errorf("CommandError = %+v", ce)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "partial\n" {
		t.Errorf("result = %+v", res)
	}
	msg := err.Error()
	for _, want := range []string{"host h1", "step etcd/start", "exit 3", "exited with code 3", "etcd: bad flag --foo"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	// Wrapped further, it is still found.
	wrapped := fmt.Errorf("phase etcd/start: %w", err)
	if !errors.As(wrapped, &ce) {
		t.Error("errors.As through a wrap failed")
	}
}

func TestCommandErrorLongStderr(t *testing.T) {
	ce := &provision.CommandError{Host: "h", Step: "s", Command: "x", ExitCode: 1, Stderr: strings.Repeat("a", 20000) + "THE END"}
	msg := ce.Error()
	if !strings.HasSuffix(msg, "THE END") || len(msg) > 9000 || !strings.Contains(msg, "bytes omitted") {
		t.Errorf("long stderr not trimmed to its tail: len %d", len(msg))
	}
}

// processGone reports whether pid has exited (or is a zombie).
func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) S ...
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func TestRunTimeoutAndCancelKill(t *testing.T) {
	for _, mode := range []string{"timeout", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			c := e.dial()
			pidFile := filepath.Join(e.dir, "pid")
			var (
				ctx    context.Context
				cancel context.CancelFunc
			)
			if mode == "timeout" {
				ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
			} else {
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(300*time.Millisecond, cancel)
			}
			defer cancel()
			start := time.Now()
			_, err := c.Run(ctx, "etcd/wait", "echo $$ > "+pidFile+"; echo waiting >&2; exec sleep 30")
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("Run returned after %v", elapsed)
			}
			var ce *provision.CommandError
			if !errors.As(err, &ce) || ce.ExitCode != -1 {
				t.Fatalf("error %v is not a *CommandError with exit -1", err)
			}
			want, word := context.DeadlineExceeded, "timed out"
			if mode == "cancel" {
				want, word = context.Canceled, "cancelled"
			}
			if !errors.Is(err, want) || !strings.Contains(err.Error(), word) {
				t.Errorf("error %q: want errors.Is %v and %q", err, want, word)
			}
			b, rerr := os.ReadFile(pidFile)
			if rerr != nil {
				t.Fatal(rerr)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			deadline := time.Now().Add(2 * time.Second)
			for !processGone(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("remote command (pid %d) still running", pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The connection is still usable.
			if _, err := c.Run(ctxTimeout(t, 5*time.Second), "after", "true"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRunContextAlreadyDone(t *testing.T) {
	c := newEnv(t).dial()
	before := c.Commands()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Run(ctx, "s", "true")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if c.Commands() != before {
		t.Errorf("Commands() = %d, want %d", c.Commands(), before)
	}
}

// TestShellQuoteOverSSH: words quoted with shell.Quote reach the host's shell unchanged through Run.
func TestShellQuoteOverSSH(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "''"},
		{"/etc/etcd/pki", "/etc/etcd/pki"},
		{"root:root", "root:root"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$(reboot)", "'$(reboot)'"},
		{"a\nb", "'a\nb'"},
	}
	for _, tt := range tests {
		if got := shell.Quote(tt.in); got != tt.want {
			t.Errorf("shell.Quote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	// Round trip through a real shell.
	c := newEnv(t).dial()
	for _, tt := range tests {
		res, err := c.Run(ctxTimeout(t, 5*time.Second), "quote", "printf %s "+shell.Quote(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(res.Stdout, []byte(tt.in)) {
			t.Errorf("round trip of %q gave %q", tt.in, res.Stdout)
		}
	}
}

func TestKeepAliveDetectsDeadHost(t *testing.T) {
	e := newEnv(t)
	e.trust()
	cfg := e.config()
	cfg.KeepAliveInterval = 50 * time.Millisecond
	c, err := provision.Dial(context.Background(), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Run(ctxTimeout(t, 5*time.Second), "before", "true"); err != nil {
		t.Fatal(err)
	}
	e.srv.Freeze()
	start := time.Now()
	_, err = c.Run(ctxTimeout(t, 5*time.Second), "after", "true")
	if err == nil || !strings.Contains(err.Error(), "stopped responding") {
		t.Fatalf("err = %v, want the keepalive verdict", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("dead host noticed after %v (err %v)", time.Since(start), err)
	}
}
