package deploy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/state"
)

func TestWhereAndRecord(t *testing.T) {
	c := &v1alpha1.Cluster{}
	c.Spec.StateDir = t.TempDir()
	given := &kubeapi.Kubeconfig{Path: "/flags/kind.conf", Context: "kind-ci"}

	// No state yet: nothing recorded, the defaults; Record leaves a missing state alone.
	if loc := Where(c, nil); loc.Namespace != DefaultNamespace || loc.Kubeconfig != nil {
		t.Errorf("no state: %+v", loc)
	}
	if err := Record(c, &Location{Namespace: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Spec.StateDir, state.FileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Record created a state file (stat: %v)", err)
	}

	if err := state.Save(c.Spec.StateDir, &state.Cluster{Name: "lab", ClusterID: "abc"}); err != nil {
		t.Fatal(err)
	}
	if err := Record(c, &Location{Namespace: "hactl-quorum", Kubeconfig: &kubeapi.Kubeconfig{Path: "/lab/admin.conf", Context: "lab"}}); err != nil {
		t.Fatal(err)
	}
	if loc := Where(c, nil); loc.Namespace != "hactl-quorum" || loc.Kubeconfig == nil || *loc.Kubeconfig != (kubeapi.Kubeconfig{Path: "/lab/admin.conf", Context: "lab"}) {
		t.Errorf("recorded: %+v", loc)
	}
	if loc := Where(c, given); loc.Kubeconfig != given || loc.Namespace != "hactl-quorum" {
		t.Errorf("--kubeconfig given: %+v (the flags win, the namespace is the recorded one)", loc)
	}
	if st, _ := state.Load(c.Spec.StateDir); st.ClusterID != "abc" {
		t.Errorf("Record lost the rest of the state: %+v", st)
	}

	// Over SSH: the namespace only.
	if err := Record(c, &Location{Namespace: DefaultNamespace}); err != nil {
		t.Fatal(err)
	}
	if loc := Where(c, nil); loc.Kubeconfig != nil || loc.Namespace != DefaultNamespace {
		t.Errorf("over SSH: %+v", loc)
	}
	if err := Record(c, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := state.Load(c.Spec.StateDir); st.Operator != nil || st.ClusterID != "abc" {
		t.Errorf("after remove: %+v", st)
	}
}
