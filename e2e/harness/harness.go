// Package harness is what every e2e suite shares: TestMain's lab lifecycle (one lab per package,
// always torn down, also on SIGINT/SIGTERM; a machine that cannot run the lab fails the suite loudly)
// and running the real hactl binary with its command line and output logged so a failure can be
// replayed by hand.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hactl/hactl/e2e/lab"
)

// Suite is one e2e package's shared state, set by Main before any test runs.
type Suite struct {
	// Lab is the package's lab.
	Lab *lab.Lab
	// Bin is the hactl binary under test ($HACTL_BIN, else built into <repo>/bin/hactl).
	Bin string
	// RepoRoot is the repository root.
	RepoRoot string
}

// Main brings up the lab described by opts (RepoRoot and Logf are filled in; a relative opts.Dir is
// taken from the repository root), stores the suite in
// *s, runs the tests and tears the lab down. It returns the exit code for os.Exit. name prefixes
// its own messages (e.g. "e2e/access").
func Main(m *testing.M, name string, opts lab.Options, s *Suite) int {
	ctx := context.Background()
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	bin := os.Getenv("HACTL_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin", "hactl")
		build := exec.Command("go", "build", "-o", bin, "./cmd/hactl")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: building hactl: %v\n", name, err)
			return 1
		}
	}
	opts.RepoRoot = root
	if opts.Dir != "" && !filepath.IsAbs(opts.Dir) {
		opts.Dir = filepath.Join(root, opts.Dir)
	}
	if opts.Logf == nil {
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	// Tear the lab down on SIGINT/SIGTERM too (go test's own timeout panic is covered by the next
	// run: Up removes every hactl-lab leftover first).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "%s: interrupted: tearing the lab down\n", name)
			_ = lab.Down(context.Background())
			os.Exit(1)
		}
	}()
	l, err := lab.Up(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: FAILED: the lab could not be brought up on this machine: %v\n"+
			"%s: the lab needs a running docker daemon, debootstrap and the host image (make host-deps lab-image); see README.md\n",
			name, err, name)
		_ = lab.Down(ctx)
		return 1
	}
	*s = Suite{Lab: l, Bin: bin, RepoRoot: root}
	code := m.Run()
	if err := l.Down(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: tearing the lab down: %v\n", name, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Hactl runs the suite's hactl binary with args (see Run).
func (s *Suite) Hactl(t *testing.T, args ...string) Result {
	t.Helper()
	return Run(t, s.Bin, nil, args...)
}

// MustHactl is Hactl failing the test unless hactl exits 0.
func (s *Suite) MustHactl(t *testing.T, args ...string) Result {
	t.Helper()
	r := Run(t, s.Bin, nil, args...)
	if r.Code != 0 {
		t.Fatalf("hactl %s: exit %d, want 0", strings.Join(args, " "), r.Code)
	}
	return r
}

// ExecOn runs args inside the lab host (docker exec, for assertions) and fails the test when it
// fails.
func (s *Suite) ExecOn(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := s.Lab.Exec(context.Background(), host, args...)
	if err != nil {
		t.Fatalf("on %s: %v\n%s", host, err, out)
	}
	return out
}

// Result is one hactl invocation.
type Result struct {
	Stdout, Stderr string
	Code           int
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.Code, r.Stdout, r.Stderr)
}

// Run runs bin with args and extra environment variables (env values are logged: never pass a
// secret you don't want in the test log; pass "NAME=" to unset a variable), bounded by 5 minutes,
// with its debug log in a temp dir. It logs the command line and the output.
func Run(t *testing.T, bin string, env []string, args ...string) Result {
	t.Helper()
	r := run(t, bin, env, args...)
	t.Logf("%s", r)
	return r
}

// RunQuiet is Run for polling loops: it logs the command line and the exit code only (the caller
// logs the output when it is what fails the test).
func RunQuiet(t *testing.T, bin string, env []string, args ...string) Result {
	t.Helper()
	r := run(t, bin, env, args...)
	t.Logf("exit %d", r.Code)
	return r
}

func run(t *testing.T, bin string, env []string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Logf("$ %s%s %s", envPrefix(env), bin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, append(args, "--log-file", filepath.Join(t.TempDir(), "hactl.log"))...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running hactl: %v", err)
	}
	return r
}

func envPrefix(env []string) string {
	if len(env) == 0 {
		return ""
	}
	return strings.Join(env, " ") + " "
}
