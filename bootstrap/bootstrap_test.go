package bootstrap

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/restore"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/ui"
)

// TestPhases: the groups interleave into bootstrap's one list — the order users see in progress
// lines and name in --skip-phases — and --restore-from adds the seed's phases at their places.
func TestPhases(t *testing.T) {
	c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
	c.Metadata.Name = "lab"
	c.Spec.StateDir = filepath.Join(t.TempDir(), "state")
	for i, z := range []string{"a", "b", "c"} {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "cp-" + z, Address: "10.0.0." + string(rune('1'+i)), Zone: "az-" + z,
			Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}})
	}
	c.Spec.Etcd.Version = "v3.6.16"
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
	b, err := New(Options{Cluster: c, Printer: ui.New(&bytes.Buffer{}, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	want := "preflight lb/preflight kube/preflight pki detect plan lb/plan kube/plan kube/binaries lb/packages lb/install etcd/install etcd/start etcd/wait " +
		"kube/etcd-certs lb/wait kube/runtime kube/kubelet kube/images kube/init kube/join kube/cni kube/wait"
	if got := strings.Join(phase.Titles(b.Phases()), " "); got != want {
		t.Errorf("phases:\n got %s\nwant %s", got, want)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	os.WriteFile(snap, []byte("db"), 0o600)
	b, err = New(Options{Cluster: c, Printer: ui.New(&bytes.Buffer{}, false, false),
		RestoreFrom: &restore.Options{Snapshot: snap, SHA256: strings.Repeat("ab", 32), Revision: 7}})
	if err != nil {
		t.Fatal(err)
	}
	want = "preflight lb/preflight kube/preflight pki detect plan restore/check lb/plan kube/plan kube/binaries lb/packages lb/install etcd/install " +
		"restore/ship restore/seed etcd/start etcd/wait restore/verify kube/etcd-certs lb/wait kube/runtime kube/kubelet kube/images kube/init " +
		"kube/join kube/cni kube/wait"
	if got := strings.Join(phase.Titles(b.Phases()), " "); got != want {
		t.Errorf("phases with --restore-from:\n got %s\nwant %s", got, want)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without a spec succeeded")
	}
}
