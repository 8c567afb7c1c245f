//go:build e2e

// Package e2e runs the real hactl binary against the lab (e2e/lab): systemd hosts in containers
// reached over real SSH. One lab per package run, shared by its tests, always torn down. Run with
// `make e2e` (go test -tags e2e -p 1 -timeout ...). The lab cannot be skipped: if this machine
// cannot run it, the suite fails and says why.
package e2e

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

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/lab"
)

var (
	theLab   *lab.Lab
	hactlBin string
	labDir   string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	hactlBin = os.Getenv("HACTL_BIN")
	if hactlBin == "" {
		hactlBin = filepath.Join(root, "bin", "hactl")
		build := exec.Command("go", "build", "-o", hactlBin, "./cmd/hactl")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: building hactl: %v\n", err)
			return 1
		}
	}
	labDir = filepath.Join(root, ".lab-e2e")
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	// Tear the lab down on SIGINT/SIGTERM too (go test's own timeout panics are covered by the next
	// run: Up removes every hactl-lab leftover first).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "e2e: interrupted: tearing the lab down")
		_ = lab.Down(context.Background())
		os.Exit(1)
	}()
	l, err := lab.Up(ctx, lab.Options{Members: 5, RepoRoot: root, Dir: labDir, Logf: logf})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAILED: the lab could not be brought up on this machine: %v\n"+
			"e2e: the lab needs a running docker daemon, debootstrap and the host image (make host-deps lab-image); see README.md\n", err)
		_ = lab.Down(ctx)
		return 1
	}
	theLab = l
	code := m.Run()
	if err := l.Down(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: tearing the lab down: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// result is one hactl invocation.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// hactl runs the real binary and logs the command line and its output so a failure can be replayed.
func hactl(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Logf("$ %s %s", hactlBin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, hactlBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running hactl: %v", err)
	}
	t.Logf("%s", r)
	return r
}

// mustHactl runs hactl and fails the test unless it exits 0.
func mustHactl(t *testing.T, args ...string) result {
	t.Helper()
	r := hactl(t, args...)
	if r.code != 0 {
		t.Fatalf("hactl %s: exit %d, want 0", strings.Join(args, " "), r.code)
	}
	return r
}

// writeSpec marshals a spec into dir and returns its path.
func writeSpec(t *testing.T, c *v1alpha1.Cluster, name string) string {
	t.Helper()
	raw, err := lab.MarshalSpec(c)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// labSpec returns the lab's spec for members members (a fresh copy to modify).
func labSpec(t *testing.T, members int) *v1alpha1.Cluster {
	t.Helper()
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	c, err := lab.BuildSpec(members, labDir, filepath.Join(root, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func execOn(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := theLab.Exec(context.Background(), host, args...)
	if err != nil {
		t.Fatalf("on %s: %v\n%s", host, err, out)
	}
	return out
}
