package bootstrap

import (
	"errors"
	"strings"
	"testing"

	"github.com/hactl/hactl/internal/exitcode"
)

// TestCheckSkippable: a required phase, by name or by its group, is refused naming why; others pass.
func TestCheckSkippable(t *testing.T) {
	for _, skip := range [][]string{{"pki"}, {"etcd/", "preflight"}, {"plan"}} {
		var ue *exitcode.UsageError
		if err := CheckSkippable(skip); !errors.As(err, &ue) || !strings.Contains(err.Error(), "can't be skipped") {
			t.Errorf("%q: %v, want a usage error", skip, err)
		}
	}
	if err := CheckSkippable([]string{"kube/cni", "lb/"}); err != nil {
		t.Errorf("skippable phases refused: %v", err)
	}
}

// TestCheckNames: exact names and groups pass; "all" only for --ignore-preflight-errors; an
// unknown name is a usage error listing the valid ones.
func TestCheckNames(t *testing.T) {
	valid := []string{"etcd/start", "etcd/wait"}
	if err := checkNames("--skip-phases", []string{"etcd/start", "etcd/"}, valid); err != nil {
		t.Error(err)
	}
	if err := checkNames("--ignore-preflight-errors", []string{"all"}, valid); err != nil {
		t.Error(err)
	}
	err := checkNames("--skip-phases", []string{"all"}, valid)
	if want := `--skip-phases: unknown name "all"; valid: etcd/start, etcd/wait`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
