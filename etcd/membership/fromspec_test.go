package membership

import (
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestForgetRemovedOnlyRemoved: removals that did not remove their member (planned, failed, nil)
// leave the state dir alone: nothing is read or written.
func TestForgetRemovedOnlyRemoved(t *testing.T) {
	c := &v1alpha1.Cluster{}
	c.Spec.StateDir = filepath.Join(t.TempDir(), "missing", "state")
	if err := ForgetRemoved(c, nil, &RemoveResult{Member: "etcd-a", ID: "1"}); err != nil {
		t.Fatalf("nothing removed: %v", err)
	}
}
