package membership

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/state"
)

// TestForgetRemovedOnlyRemoved: removals that did not remove their member (planned, failed, nil)
// leave the state dir alone: nothing is read or written. The state dir's record is unreadable, so
// reading it fails, as the removal that did remove its member shows.
func TestForgetRemovedOnlyRemoved(t *testing.T) {
	c := &v1alpha1.Cluster{}
	c.Spec.StateDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(c.Spec.StateDir, state.FileName), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ForgetRemoved(c, nil, &RemoveResult{Member: "etcd-a", ID: "1"}); err != nil {
		t.Fatalf("nothing removed: %v", err)
	}
	if err := ForgetRemoved(c, &RemoveResult{Member: "etcd-a", ID: "1", Removed: true}); err == nil {
		t.Fatal("a removed member: the unreadable state dir was not read")
	}
}
