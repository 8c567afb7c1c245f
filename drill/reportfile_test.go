package drill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/internal/exitcode"
)

// TestReportFile: --report is checked before anything is contacted (exit 2 for a missing directory
// or a directory), and the report is written as indented JSON that reads back.
func TestReportFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing", "r.json"), "its directory does not exist"},
		{dir, "is a directory: give a file path, e.g. " + filepath.Join(dir, "drill.json")},
	} {
		err := CheckReportPath(tc.path)
		if !IsInput(err) || exitcode.Of(err) != exitcode.Invalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckReportPath(%s) = %v (exit %d); want exit 2 saying %q", tc.path, err, exitcode.Of(err), tc.want)
		}
	}
	p := filepath.Join(dir, "r.json")
	if err := CheckReportPath(p); err != nil {
		t.Fatal(err)
	}
	o := &Options{Cluster: spec(t, three, nil), Kind: KillLeader, Method: MethodProcess, Count: 1, Report: filepath.Join(dir, "no", "r.json")}
	if err := o.Validate(); !IsInput(err) || !strings.Contains(err.Error(), "--report") {
		t.Errorf("Validate with a --report in a missing directory: %v", err)
	}
	rep := &Report{ID: "20261201-051144-a3f9", Cluster: "t", Drill: KillLeader, Verdict: "pass"}
	if err := rep.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	var back Report
	if err != nil || json.Unmarshal(raw, &back) != nil || back.ID != rep.ID || !bytes.HasSuffix(raw, []byte("}\n")) || !bytes.Contains(raw, []byte("\n  \"id\"")) {
		t.Errorf("report file %q (%v)", raw, err)
	}
}

// TestExitCodes: the drill's errors choose the process exit code themselves.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&InputError{Err: errors.New("x")}, exitcode.Invalid},
		{fmt.Errorf("wrapped: %w", &InputError{Err: errors.New("x")}), exitcode.Invalid},
		{&RefusedError{Reasons: []string{"x"}}, exitcode.Verdict},
		{errors.Join(&VerdictError{Failures: []string{"lost"}}, errors.New("--report r.json: disk full")), exitcode.Verdict},
		{&NotRestoredError{Left: []string{"x"}}, exitcode.Failure},
	} {
		if got := exitcode.Of(tc.err); got != tc.want {
			t.Errorf("exit code of %v = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestCleanupPrint: the human summary of each cleanup outcome.
func TestCleanupPrint(t *testing.T) {
	for _, tc := range []struct {
		res  CleanupResult
		want string
	}{
		{CleanupResult{Found: []string{"x"}, dryRun: true}, "dry run: 1 leftover(s) found, nothing done\n"},
		{CleanupResult{Clean: true, Healthy: true}, "nothing to clean up\n"},
		{CleanupResult{Clean: true, Found: []string{"x"}, Healthy: true}, "no host needed putting back; the drill journal was removed\n"},
		{CleanupResult{Clean: true, Found: []string{"x"}, PutBack: []string{"a", "b"}, DeletedKeys: 3},
			"put back: a, b; no drill leftovers remain\ndeleted 3 workload key(s) left under /hactl-drill/ by interrupted drills\nthe cluster is not healthy yet: see `hactl status`\n"},
	} {
		var b bytes.Buffer
		tc.res.Print(&b)
		if b.String() != tc.want {
			t.Errorf("%+v printed %q, want %q", tc.res, b.String(), tc.want)
		}
	}
}
