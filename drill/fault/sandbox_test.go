package fault

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
)

// sandbox runs the scripts for real against fake iptables, ip6tables, systemctl and
// systemd-run (testdata/fakebin, copied to a temporary PATH directory; they keep their state in
// files and log their argv) and a temporary marker directory. PATH holds only the fakes,
// /usr/bin and /bin (not sbin), and the scripts add nothing to it, so the machine's own iptables
// and systemd are never reached.
type sandbox struct {
	t     *testing.T
	bin   string // fake commands
	state string // fakes' state and log
	p     paths
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	root := t.TempDir()
	s := &sandbox{t: t, bin: filepath.Join(root, "bin"), state: filepath.Join(root, "state"),
		p: paths{dir: filepath.Join(root, "run", "hactl-drill"), lock: filepath.Join(root, "run", "hactl-drill.lock")}}
	for _, d := range []string{s.bin, s.state, filepath.Join(root, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"iptables", "ip6tables", "systemctl", "systemd-run"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fakebin", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.bin, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Safety: every command that could touch this machine resolves to a fake.
	out, _ := s.sh("for c in iptables ip6tables systemctl systemd-run; do command -v $c; done")
	for _, l := range strings.Fields(out) {
		if !strings.HasPrefix(l, s.bin+"/") {
			t.Fatalf("sandbox PATH resolves %s outside the fakes", l)
		}
	}
	return s
}

func (s *sandbox) env() []string {
	return []string{"PATH=" + s.bin + ":/usr/bin:/bin", "FAKE_STATE=" + s.state, "FAKE_MARKER=" + s.p.dir, "LC_ALL=C"}
}

// sh runs script with /bin/sh (extra arguments become $1...) and returns stdout and the exit
// status; stderr goes to the test log.
func (s *sandbox) sh(script string, args ...string) (string, int) {
	s.t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Env = s.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		s.t.Logf("stderr:\n%s", stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return stdout.String(), code
}

// shErr is sh returning stderr too.
func (s *sandbox) shErr(script string) (stdout, stderr string, code int) {
	s.t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = s.env()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func (s *sandbox) apply(f Fault) (string, int) {
	s.t.Helper()
	script, err := applyScript(f, s.p)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.sh(script)
}

func (s *sandbox) restore() (string, int) {
	s.t.Helper()
	return s.sh(restoreScript(s.p))
}

// inspect runs the one facts command of inspectRequest (provision.FactsScript) and reads it back
// with provision.ParseFacts and InspectFrom.
func (s *sandbox) inspect(units ...string) Leftovers {
	s.t.Helper()
	req := inspectRequest(s.p, units)
	sent := time.Now()
	out, code := s.sh(provision.FactsScript(req))
	if code != 0 {
		s.t.Fatalf("inspect exited %d:\n%s", code, out)
	}
	f, err := provision.ParseFacts(req, []byte(out), sent, time.Now())
	if err != nil {
		s.t.Fatalf("ParseFacts: %v\n%s", err, out)
	}
	l, err := InspectFrom(f, units)
	if err != nil {
		s.t.Fatalf("InspectFrom: %v\n%s", err, out)
	}
	return l
}

// setUnit sets a fake unit's state.
func (s *sandbox) setUnit(unit, state string) {
	s.t.Helper()
	s.write(filepath.Join("units", unit), state+"\n")
}

func (s *sandbox) unit(unit string) string {
	b, err := os.ReadFile(filepath.Join(s.state, "units", unit))
	if err != nil {
		return "inactive"
	}
	return strings.TrimSpace(string(b))
}

// write writes a file under the fakes' state directory.
func (s *sandbox) write(name, content string) {
	s.t.Helper()
	p := filepath.Join(s.state, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sandbox) remove(name string) {
	s.t.Helper()
	if err := os.Remove(filepath.Join(s.state, name)); err != nil {
		s.t.Fatal(err)
	}
}

// log returns the fakes' argv log and empties it.
func (s *sandbox) log() []string {
	s.t.Helper()
	p := filepath.Join(s.state, "log")
	b, _ := os.ReadFile(p)
	_ = os.Remove(p)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// table returns a fake filter table chain's rules ("" when the chain does not exist).
func (s *sandbox) table(tool, chain string) (string, bool) {
	name := "chain-" + chain
	if chain == "INPUT" || chain == "OUTPUT" {
		name = "builtin-" + chain
	}
	b, err := os.ReadFile(filepath.Join(s.state, tool, name))
	return string(b), err == nil
}

func (s *sandbox) markerExists() bool {
	_, err := os.Stat(s.p.dir)
	return err == nil
}

func indexOf(lines []string, sub string) int {
	for i, l := range lines {
		if strings.Contains(l, sub) {
			return i
		}
	}
	return -1
}

func hasLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
