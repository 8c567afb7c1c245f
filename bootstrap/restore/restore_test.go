package restore

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/etcdphases"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// testSpec is a 3-member spec (cp-a, cp-b, cp-c); with kube, they are control planes too, beside
// cp-d, a control plane alone (an IPv6 address).
func testSpec(t *testing.T, kube bool) *v1alpha1.Cluster {
	t.Helper()
	c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
	c.Metadata.Name = "lab"
	c.Spec.StateDir = filepath.Join(t.TempDir(), "state")
	roles := []v1alpha1.Role{v1alpha1.RoleEtcd}
	if kube {
		roles = append(roles, v1alpha1.RoleControlPlane)
	}
	for i, z := range []string{"a", "b", "c"} {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "cp-" + z, Address: "10.0.0." + string(rune('1'+i)), Zone: "az-" + z, Roles: roles})
	}
	if kube {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "cp-d", Address: "fd00::4", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleControlPlane}})
		c.Spec.Kubernetes = &v1alpha1.Kubernetes{Version: "v1.37.2"}
	}
	c.Spec.Etcd.Version = "v3.6.16"
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
	return c
}

// testGroupOf is a restore (newCluster false) or seed group over spec c, contacting nothing.
func testGroupOf(t *testing.T, c *v1alpha1.Cluster, newCluster bool) (*Group, *etcdphases.Group) {
	t.Helper()
	eg, err := etcdphases.New(runctx.New(c, ui.New(&bytes.Buffer{}, false, false), false, provision.SpecOptions{}), etcdphases.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	os.WriteFile(snap, []byte("db"), 0o600)
	r, err := NewGroup(eg, Options{Snapshot: snap, SHA256: strings.Repeat("ab", 32), Revision: 5}, newCluster)
	if err != nil {
		t.Fatal(err)
	}
	return r, eg
}

// testGroup is a restore group over testSpec's 3 members, contacting nothing.
func testGroup(t *testing.T, newCluster bool) (*Group, *etcdphases.Group) {
	t.Helper()
	return testGroupOf(t, testSpec(t, false), newCluster)
}

// TestRestoreScripts: the commands a restore runs on a member move the data dir aside (never
// delete it), restore under the member's own name and peer URL with the full initial cluster, the
// new token and the revision bump, and parse as POSIX sh; the rollback puts the old data dir back.
func TestRestoreScripts(t *testing.T) {
	r, eg := testGroup(t, false)
	r.stamp, r.token, r.remote = "20261201T030000Z", "lab-new", "/var/lib/hactl/restore-20261201T030000Z.db"
	m := eg.Members()[1]
	r.aside[m.Name] = "/var/lib/etcd.pre-restore-20261201T030000Z"
	script := r.restoreScript(m)
	for _, want := range []string{
		"mv /var/lib/etcd /var/lib/etcd.pre-restore-20261201T030000Z;",
		"snapshot restore /var/lib/hactl/restore-20261201T030000Z.db --name cp-b --data-dir /var/lib/etcd",
		"--initial-cluster " + eg.FoundingCluster() + " ",
		"--initial-cluster-token lab-new ",
		"--initial-advertise-peer-urls " + m.PeerURL + " ",
		"--bump-revision 1000000000 --mark-compacted",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("restore script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "rm -rf") || strings.Contains(script, "rm -r ") {
		t.Errorf("a restore script deletes a directory:\n%s", script)
	}
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v %s", err, out)
	}
}

// TestPhaseLists: `hactl restore` runs the etcd group's preflight, pki and detect, then its own
// phases around the etcd group's start and wait; --restore-from splices the seed phases into
// bootstrap's list by the etcd phases' titles.
func TestPhaseLists(t *testing.T) {
	r, eg := testGroup(t, false)
	l, err := r.RestorePhases()
	if err != nil {
		t.Fatal(err)
	}
	want := "preflight pki detect restore/plan restore/ship restore/stop restore/data restore/start etcd/wait restore/verify"
	if got := strings.Join(phase.Titles(l), " "); got != want {
		t.Errorf("restore phases:\n got %s\nwant %s", got, want)
	}
	seed, _ := testGroup(t, true)
	l, err = seed.Splice(eg.Phases())
	if err != nil {
		t.Fatal(err)
	}
	want = "preflight pki detect plan restore/check etcd/install restore/ship restore/seed etcd/start etcd/wait restore/verify"
	if got := strings.Join(phase.Titles(l), " "); got != want {
		t.Errorf("seeded bootstrap phases:\n got %s\nwant %s", got, want)
	}
	if _, err := NewGroup(eg, Options{}, false); err == nil {
		t.Error("a restore without a verified snapshot was accepted")
	}
}
