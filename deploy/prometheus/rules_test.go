package prometheus

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ruleFiles are the rule files, each with its promtool unit tests (<name>.rules_test.yaml).
var ruleFiles = []string{"hactl-scheduler.rules.yaml", "hactl-operator.rules.yaml", "hactl-hosts.rules.yaml"}

// promtool returns the promtool to run: the one on PATH, else /usr/bin/promtool (Debian's
// prometheus package; hack/ensure-promtool.sh installs it). Missing: the test is skipped, or fails
// when HACTL_REQUIRE_PROMTOOL=1 (make unit sets it so the rule tests can't silently disappear).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if _, statErr := os.Stat("/usr/bin/promtool"); statErr == nil {
			return "/usr/bin/promtool"
		}
		msg := "promtool not available (" + err.Error() + "); run hack/ensure-promtool.sh (installs Debian's prometheus package, which ships it)"
		if os.Getenv("HACTL_REQUIRE_PROMTOOL") == "1" {
			t.Fatal(msg + " (HACTL_REQUIRE_PROMTOOL=1)")
		}
		t.Skip(msg)
	}
	return p
}

// run runs promtool with args in dir and returns its combined output and error.
func run(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRules checks the rule file (syntax, PromQL, templates) and runs its unit tests.
func TestRules(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, rulesFile := range ruleFiles {
		testsFile := strings.TrimSuffix(rulesFile, ".yaml") + "_test.yaml"
		if out, err := run(t, dir, "check", "rules", rulesFile); err != nil {
			t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
		}
		out, err := run(t, dir, "test", "rules", testsFile)
		if err != nil {
			t.Fatalf("promtool test rules %s: %v\n%s", testsFile, err, out)
		}
		t.Logf("promtool test rules %s:\n%s", testsFile, out)
	}
}

// TestRulesCatchWrongExpectation proves the unit tests can fail: a copy with one expected
// annotation changed (the pending-pods count) must make promtool exit non-zero, naming that test.
func TestRulesCatchWrongExpectation(t *testing.T) {
	const rulesFile, testsFile = "hactl-scheduler.rules.yaml", "hactl-scheduler.rules_test.yaml"
	tmp := t.TempDir()
	for _, f := range []string{rulesFile, testsFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if f == testsFile {
			const good = `summary: "4 pods pending in hactl-scheduler's queue for 5m"`
			if !strings.Contains(string(b), good) {
				t.Fatalf("%s no longer holds %s: update this test", f, good)
			}
			b = []byte(strings.Replace(string(b), good, strings.Replace(good, "4 pods", "5 pods", 1), 1))
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, tmp, "test", "rules", testsFile)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("promtool test rules with a wrong expectation: want a non-zero exit, got err=%v\n%s", err, out)
	}
	if !strings.Contains(out, "pods pending for 6 minutes") || !strings.Contains(out, "5 pods pending") {
		t.Fatalf("promtool's failure does not name the broken test and expectation:\n%s", out)
	}
}
