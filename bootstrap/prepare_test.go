package bootstrap

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/ui"
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

// TestPrepareReplaceLostBesideRestore: --replace-lost beside --restore-from is refused before the
// backup is fetched (the bucket "latest" would need is never asked: the spec has no spec.backup).
func TestPrepareReplaceLostBesideRestore(t *testing.T) {
	src, err := backup.ParseSource("--restore-from", "latest")
	if err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.Cluster{}
	c.Spec.StateDir = t.TempDir()
	_, cleanup, err := Prepare(context.Background(), PrepareOptions{Options: Options{Cluster: c, ReplaceLost: []string{"etcd-a"}, Printer: ui.New(io.Discard, false, false)},
		RestoreSource: &src})
	cleanup()
	var ue *exitcode.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--replace-lost and --restore-from") {
		t.Errorf("got %v, want the two flags refused together", err)
	}
}
