// Package harness is what every e2e suite shares: TestMain's lab lifecycle (one lab per package,
// always torn down, also on SIGINT/SIGTERM; a machine that cannot run the lab fails the suite loudly),
// running the real hactl binary with its command line and output logged so a failure can be
// replayed by hand, and the assertions' helpers every suite needs (commands on lab hosts, specs,
// -o json reports, etcd clients, polling).
//
// Helpers that take a *testing.T report failures with t.Fatalf (the test stops); none of them
// skips.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/hactl/hactl/e2e/lab"
)

// Suite is one e2e package's shared state, set by Main before any test runs. Tests run hactl
// through its methods.
type Suite struct {
	// Lab is the package's lab.
	Lab *lab.Lab
	// Bin is the hactl binary under test ($HACTL_BIN, else built into <repo>/bin/hactl).
	Bin string
	// RepoRoot is the repository root.
	RepoRoot string

	env []envVar // added to hactl's environment (WithEnv, WithSecretEnv)
}

// envVar is one NAME=value entry for hactl's environment; a secret one is logged as NAME=***.
type envVar struct {
	kv     string
	secret bool
}

// Main is a package's TestMain: it brings up the lab described by opts (RepoRoot and Logf are
// filled in; a relative opts.Dir is taken from the repository root), stores the suite in *s, runs
// the tests and tears the lab down — also when a test fails and on SIGINT/SIGTERM. It returns the
// exit code for os.Exit: 1 with the reason on stderr when the repository, the hactl build or the lab
// fails (a machine that cannot run the lab fails the suite, it never skips), else m.Run's code (1 if
// the teardown fails). name prefixes its own messages (e.g. "e2e/access").
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
	// go test's -timeout covers m.Run only: a lab up or down that hangs would hold the binary until
	// go test kills it, with no word of where. The watchdog dumps every goroutine and fails first.
	dog := watchdog(name, "lab up", labTimeout)
	l, err := lab.Up(ctx, opts)
	dog.Stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: FAILED: the lab could not be brought up on this machine: %v\n"+
			"%s: the lab needs a running docker daemon, debootstrap and the host image (make host-deps lab-image); see README.md\n",
			name, err, name)
		_ = lab.Down(ctx)
		return 1
	}
	*s = Suite{Lab: l, Bin: bin, RepoRoot: root}
	code := m.Run()
	dog = watchdog(name, "lab down", labTimeout)
	defer dog.Stop()
	if err := l.Down(ctx); errors.Is(err, lab.ErrStaleEndpoints) {
		fmt.Fprintf(os.Stderr, "%s: tearing the lab down: warning: %v\n", name, err)
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "%s: tearing the lab down: %v\n", name, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// labTimeout bounds a lab up (a cold host image build included) and a lab down in Main.
const labTimeout = 25 * time.Minute

// watchdog starts a timer that, unless stopped within d, writes every goroutine's stack to stderr
// under "<name>: <what> did not finish within <d>", tears the lab down (bounded by 2 minutes) and
// exits the test binary with 1.
func watchdog(name, what string, d time.Duration) *time.Timer {
	return time.AfterFunc(d, func() {
		fmt.Fprintf(os.Stderr, "%s: FAILED: %s did not finish within %s; goroutines:\n", name, what, d)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = lab.Down(ctx)
		os.Exit(1)
	})
}

// WithEnv returns a copy of s whose hactl runs (Hactl, MustHactl, HactlQuiet, BootstrapJSON,
// Command) add env ("NAME=value"; "NAME=" clears a variable) to this process's environment. The
// entries are logged with the command line: pass secrets with WithSecretEnv.
func (s *Suite) WithEnv(env ...string) *Suite {
	return s.withEnv(env, false)
}

// WithSecretEnv is WithEnv for values that must stay out of the test log: they are logged as
// NAME=***.
func (s *Suite) WithSecretEnv(env ...string) *Suite {
	return s.withEnv(env, true)
}

func (s *Suite) withEnv(env []string, secret bool) *Suite {
	c := *s
	c.env = append([]envVar(nil), s.env...)
	for _, kv := range env {
		c.env = append(c.env, envVar{kv: kv, secret: secret})
	}
	return &c
}
