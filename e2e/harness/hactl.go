package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/report"
)

// runTimeout bounds one hactl run of Hactl, MustHactl and HactlQuiet.
const runTimeout = 5 * time.Minute

// Result is one hactl run.
type Result struct {
	// Args is hactl's command line as the test gave it (without the --log-file the harness adds).
	Args []string
	// Stdout and Stderr are everything hactl wrote there.
	Stdout, Stderr string
	// Code is hactl's exit code.
	Code int
	// LogFile is the run's --log-file (hactl's debug log), in the test's temp dir.
	LogFile string
}

// String is the exit code and both outputs, for test logs and failure messages.
func (r Result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.Code, r.Stdout, r.Stderr)
}

// Hactl runs the suite's hactl with args plus `--log-file <temp dir>/hactl.log`, bounded by 5
// minutes, and returns the result whatever the exit code. It logs the command line (with the
// WithEnv entries) before the run and the exit code and output after it. A hactl that cannot be
// started fails the test (t.Fatalf).
func (s *Suite) Hactl(t *testing.T, args ...string) Result {
	t.Helper()
	r := s.run(t, args)
	t.Logf("%s", r)
	return r
}

// MustHactl is Hactl failing the test (t.Fatalf) unless hactl exits 0.
func (s *Suite) MustHactl(t *testing.T, args ...string) Result {
	t.Helper()
	r := s.Hactl(t, args...)
	if r.Code != 0 {
		t.Fatalf("hactl %s: exit %d, want 0", strings.Join(args, " "), r.Code)
	}
	return r
}

// HactlQuiet is Hactl for polling loops: it logs the command line and the exit code only (the
// caller logs the output when it is what fails the test).
func (s *Suite) HactlQuiet(t *testing.T, args ...string) Result {
	t.Helper()
	r := s.run(t, args)
	t.Logf("exit %d", r.Code)
	return r
}

// BootstrapJSON runs `hactl bootstrap -f spec -o json extra...`, fails the test (t.Fatalf) unless
// it exits 0 with a JSON report listing at least one member (every valid spec has an etcd member,
// so callers' loops over Members always check something), and returns the report.
func (s *Suite) BootstrapJSON(t *testing.T, spec string, extra ...string) report.Cluster {
	t.Helper()
	var res report.Cluster
	r := s.MustHactl(t, append([]string{"bootstrap", "-f", spec, "-o", "json"}, extra...)...)
	DecodeJSON(t, r, &res)
	if len(res.Members) == 0 {
		t.Fatalf("hactl %s: the report lists no member:\n%s", strings.Join(r.Args, " "), r.Stdout)
	}
	return res
}

// Command returns hactl with exactly args (no --log-file added, no timeout) and the suite's
// environment, not started, for runs a test drives itself (in the background, with signals). It
// logs the command line; the caller logs the output.
func (s *Suite) Command(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	t.Logf("$ %s", s.commandLine(args))
	cmd := exec.Command(s.Bin, args...)
	cmd.Env = s.environ()
	return cmd
}

// DecodeJSON decodes r's standard output (a command's -o json report) into v and fails the test
// (t.Fatalf, with the command line and r) if it is not JSON.
func DecodeJSON(t *testing.T, r Result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Stdout), v); err != nil {
		t.Fatalf("hactl %s: -o json output is not JSON: %v\n%s", strings.Join(r.Args, " "), err, r)
	}
}

// ReadJSON decodes the JSON file at path (a --report hactl wrote) into v. It returns the error of
// reading or decoding instead of failing the test: what a missing or broken report means is the
// caller's assertion.
func ReadJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

func (s *Suite) run(t *testing.T, args []string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	t.Logf("$ %s", s.commandLine(args))
	r := Result{Args: args, LogFile: filepath.Join(t.TempDir(), "hactl.log")}
	cmd := exec.CommandContext(ctx, s.Bin, append(append([]string(nil), args...), "--log-file", r.LogFile)...)
	cmd.Env = s.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r.Stdout, r.Stderr = out.String(), errb.String()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running hactl: %v", err)
	}
	return r
}

// environ is this process's environment plus the suite's entries.
func (s *Suite) environ() []string {
	env := os.Environ()
	for _, e := range s.env {
		env = append(env, e.kv)
	}
	return env
}

// commandLine is the command line as logged: the suite's environment entries (secret values
// masked), the binary and args.
func (s *Suite) commandLine(args []string) string {
	var b strings.Builder
	for _, e := range s.env {
		kv := e.kv
		if name, _, ok := strings.Cut(kv, "="); ok && e.secret {
			kv = name + "=***"
		}
		b.WriteString(kv + " ")
	}
	b.WriteString(s.Bin)
	for _, a := range args {
		b.WriteString(" " + a)
	}
	return b.String()
}
