package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/e2e/lab"
)

// fakeHactl is a Suite whose binary prints its arguments and $HACTL_E2E_TEST to stdout, "err" to
// stderr, writes its --log-file and exits with $HACTL_E2E_EXIT (default 0).
func fakeHactl(t *testing.T) *Suite {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hactl")
	script := `#!/bin/sh
echo "$@" "[$HACTL_E2E_TEST]"
echo err >&2
while [ $# -gt 0 ]; do
	if [ "$1" = --log-file ] && [ -n "$2" ]; then echo logged >"$2"; fi
	shift
done
exit "${HACTL_E2E_EXIT:-0}"
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Suite{Bin: bin}
}

func TestHactl(t *testing.T) {
	s := fakeHactl(t)
	r := s.WithEnv("HACTL_E2E_TEST=x", "HACTL_E2E_EXIT=3").Hactl(t, "status", "-f", "spec.yaml")
	if r.Code != 3 || r.Stderr != "err\n" || strings.Join(r.Args, " ") != "status -f spec.yaml" {
		t.Errorf("result %+v", r)
	}
	if want := "status -f spec.yaml --log-file " + r.LogFile + " [x]\n"; r.Stdout != want {
		t.Errorf("stdout %q, want %q", r.Stdout, want)
	}
	if b, err := os.ReadFile(r.LogFile); err != nil || string(b) != "logged\n" {
		t.Errorf("log file: %q %v", b, err)
	}
	// The suite itself is unchanged by WithEnv.
	if r := s.MustHactl(t, "plan"); r.Code != 0 || !strings.HasSuffix(r.Stdout, " []\n") {
		t.Errorf("without the env: %+v", r)
	}
	if r := s.HactlQuiet(t, "plan"); r.Code != 0 {
		t.Errorf("quiet: %+v", r)
	}
}

func TestCommand(t *testing.T) {
	s := fakeHactl(t).WithSecretEnv("HACTL_E2E_TEST=secret")
	out, err := s.Command(t, "drill", "--log-file", "").Output()
	if err != nil || string(out) != "drill --log-file  [secret]\n" {
		t.Errorf("Command: %q %v", out, err)
	}
}

func TestCommandLine(t *testing.T) {
	s := (&Suite{Bin: "/bin/hactl"}).WithEnv("A=1", "B=").WithSecretEnv("PW=hunter2", "NOVALUE")
	if got, want := s.commandLine([]string{"plan", "-f", "x.yaml"}), "A=1 B= PW=*** NOVALUE /bin/hactl plan -f x.yaml"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := (&Suite{Bin: "hactl"}).commandLine(nil); got != "hactl" {
		t.Errorf("no args: %q", got)
	}
}

func TestDecodeJSON(t *testing.T) {
	var v struct {
		Healthy bool `json:"healthy"`
	}
	DecodeJSON(t, Result{Stdout: `{"healthy": true}`}, &v)
	if !v.Healthy {
		t.Errorf("decoded %+v", v)
	}
}

func TestReadJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "report.json")
	var v struct{ Verdict string }
	if err := ReadJSON(p, &v); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(p, []byte(`{"verdict": "pass"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadJSON(p, &v); err != nil || v.Verdict != "pass" {
		t.Errorf("%+v %v", v, err)
	}
	if err := os.WriteFile(p, []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadJSON(p, &v); err == nil {
		t.Error("broken JSON accepted")
	}
}

func TestWriteSpec(t *testing.T) {
	c, err := lab.BuildSpec(3, t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want, err := lab.MarshalSpec(c)
	if err != nil {
		t.Fatal(err)
	}
	p := WriteSpec(t, c, "cluster.yaml")
	if got, err := os.ReadFile(p); err != nil || string(got) != string(want) || filepath.Base(p) != "cluster.yaml" {
		t.Errorf("%s: %v\n%s", p, err, got)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, "three calls", time.Minute, time.Millisecond, func() string {
		if n++; n < 3 {
			return "not yet"
		}
		return ""
	})
	if n != 3 {
		t.Errorf("%d calls", n)
	}
}
