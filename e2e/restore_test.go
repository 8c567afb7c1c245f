//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/restore"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/report"
)

// TestRestoreFromLocalSnapshot restores the 5-member cluster (left by TestBootstrapFiveMembers) from
// a snapshot taken between two sentinel writes: the first survives, the second is rolled back, the
// revision is bumped past the snapshot's, the cluster ID is new, every old data dir is kept, and a
// bootstrap re-run afterwards changes nothing. Bad sources and a healthy cluster without --force are
// refused without touching anything.
func TestRestoreFromLocalSnapshot(t *testing.T) {
	ctx := context.Background()
	spec := specPath(t, 5)
	suite.MustHactl(t, "bootstrap", "-f", spec)
	stateDir := filepath.Join(suite.Lab.Dir(), "state-5")
	hosts := []string{"cp-a", "cp-b", "cp-c", "etcd-d", "etcd-e"}
	var eps []string
	for _, h := range hosts {
		eps = append(eps, suite.Endpoint(t, h))
	}
	cli := harness.EtcdClient(t, stateDir, eps...)
	if _, err := cli.Put(ctx, "e2e/restore/before", "kept"); err != nil {
		t.Fatal(err)
	}
	snap, snapRev := saveSnapshot(t, cli, "snapshot.db")
	if _, err := cli.Put(ctx, "e2e/restore/after", "rolled back"); err != nil {
		t.Fatal(err)
	}
	oldID := func() uint64 {
		r, err := cli.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.ClusterId
	}()

	// Refusals: nothing changes.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--from", "gs://bucket/snap.db", "--yes"}, 2, `unknown scheme "gs"`},
		{[]string{"--from", filepath.Join(t.TempDir(), "missing.db"), "--yes"}, 2, "no such file"},
		{[]string{"--from", snap}, 2, "pass --yes"},                                                            // stdin is not a terminal
		{[]string{"--from", snap, "--yes"}, 1, "every member of cluster"},                                      // healthy, no --force
		{[]string{"--from", corrupt(t, snap), "--yes", "--force"}, 3, "refused before any member was touched"}, // etcd's trailer or integrity check
	} {
		r := suite.Hactl(t, append([]string{"restore", "-f", spec}, tc.args...)...)
		if r.Code != tc.code || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("restore %v: exit %d; want %d saying %q:\n%s", tc.args, r.Code, tc.code, tc.want, r.Stderr)
		}
	}
	if r, err := cli.Get(ctx, "e2e/restore/after"); err != nil || r.Count != 1 {
		t.Fatalf("a refused restore changed the cluster: %v %v", r, err)
	}

	r := suite.MustHactl(t, "restore", "-f", spec, "--from", snap, "--force", "--yes", "-o", "json")
	var res report.Cluster
	harness.DecodeJSON(t, r, &res)
	if res.RestoredRevision < snapRev+restore.DefaultBumpRevision {
		t.Errorf("restored revision %d, want >= %d + %d", res.RestoredRevision, snapRev, restore.DefaultBumpRevision)
	}
	cli2 := harness.EtcdClient(t, stateDir, eps...)
	get := func(k string) int64 {
		r, err := cli2.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}
	if get("e2e/restore/before") != 1 || get("e2e/restore/after") != 0 {
		t.Errorf("after the restore: before=%d after=%d; want 1 and 0", get("e2e/restore/before"), get("e2e/restore/after"))
	}
	ml, err := cli2.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ml.Header.ClusterId == oldID || len(ml.Members) != 5 || res.ClusterID == "" {
		t.Errorf("cluster ID %x (was %x), %d members, reported %q; want a new ID and 5 members", ml.Header.ClusterId, oldID, len(ml.Members), res.ClusterID)
	}
	// Revisions keep increasing for watchers: a new write lands past the bump.
	put, err := cli2.Put(ctx, "e2e/restore/new", "x")
	if err != nil || put.Header.Revision <= snapRev+restore.DefaultBumpRevision {
		t.Errorf("write after restore: %v at revision %v", err, put)
	}
	// A watch from an old revision is refused as compacted, not silently served.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wr := <-cli2.Watch(wctx, "e2e/restore/", clientv3.WithPrefix(), clientv3.WithRev(snapRev))
	if wr.CompactRevision == 0 && wr.Err() == nil {
		t.Errorf("watch from the snapshot's revision %d was not refused as compacted: %+v", snapRev, wr)
	}
	for _, h := range hosts {
		out := suite.ExecOn(t, h, "sh", "-c", "ls -d /var/lib/etcd.pre-restore-*")
		if !strings.Contains(out, "/var/lib/etcd.pre-restore-") {
			t.Errorf("%s: the old data dir was not kept: %q", h, out)
		}
	}
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: %s after the restore, want unchanged", m.Name, m.Action)
		}
	}
	waitHealthy(t, spec, 30*time.Second)
}

// corrupt writes a copy of path with bytes flipped in the middle (inside bbolt's pages) and returns it.
func corrupt(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 3; i < len(b)/3+64; i++ {
		b[i] ^= 0xff
	}
	p := filepath.Join(t.TempDir(), "corrupt.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBootstrapRestoreFromOnNewHosts is disaster recovery onto other machines: a snapshot of the
// running cluster seeds a brand-new 3-member cluster on fresh hosts with other addresses, a new state
// dir (new CA) and a new cluster token; the data is there, revisions are bumped. A host that is not
// new is refused before anything changes.
func TestBootstrapRestoreFromOnNewHosts(t *testing.T) {
	ctx := context.Background()
	src := specPath(t, 5)
	suite.MustHactl(t, "bootstrap", "-f", src)
	cli := harness.EtcdClient(t, filepath.Join(suite.Lab.Dir(), "state-5"), suite.Endpoint(t, "cp-a"), suite.Endpoint(t, "cp-b"), suite.Endpoint(t, "cp-c"))
	if _, err := cli.Put(ctx, "e2e/dr/sentinel", "from the old cluster"); err != nil {
		t.Fatal(err)
	}
	snap, snapRev := saveSnapshot(t, cli, "dr.db")

	// The new hosts: etcd-d (az-a), etcd-e (az-b) and lb-a (az-a) — other machines, other addresses.
	fresh := []string{"etcd-d", "etcd-e", "lb-a"}
	if err := suite.Lab.Recreate(ctx, fresh...); err != nil {
		t.Fatal(err)
	}
	c := labSpec(t, 5)
	c.Metadata.Name = "dr"
	c.Spec.StateDir = filepath.Join(suite.Lab.Dir(), "state-dr")
	c.Spec.Etcd.AcceptZoneQuorumLoss = true // the lab has no third zone left among free hosts
	var hosts []v1alpha1.Host
	for _, h := range c.Spec.Hosts {
		if h.Name == "etcd-d" || h.Name == "etcd-e" {
			hosts = append(hosts, h)
		}
	}
	lbA, err := suite.Lab.Host("lb-a")
	if err != nil {
		t.Fatal(err)
	}
	hosts = append(hosts, v1alpha1.Host{Name: "lb-a", Address: lbA.Address, Zone: lbA.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	c.Spec.Hosts = hosts
	dr := harness.WriteSpec(t, c, "dr.yaml")

	// A host that is not new (cp-a carries the old cluster's data) is refused, nothing changes.
	bad := *c
	bad.Spec.Hosts = append([]v1alpha1.Host(nil), hosts...)
	cpA, _ := suite.Lab.Host("cp-a")
	bad.Spec.Hosts[2] = v1alpha1.Host{Name: "cp-a", Address: cpA.Address, Zone: cpA.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}}
	bad.Spec.StateDir = filepath.Join(t.TempDir(), "state")
	before := suite.UnitStarts(t, []string{"cp-a"})
	if r := suite.Hactl(t, "bootstrap", "-f", harness.WriteSpec(t, &bad, "dr-bad.yaml"), "--restore-from", snap); r.Code != 1 || !strings.Contains(r.Stderr, "cp-a") {
		t.Errorf("restore-from onto a host with another cluster's data: exit %d; want 1 naming cp-a\n%s", r.Code, r.Stderr)
	}
	if after := suite.UnitStarts(t, []string{"cp-a"}); after["cp-a"] != before["cp-a"] {
		t.Errorf("cp-a's etcd was restarted by a refused --restore-from: %v → %v", before, after)
	}
	if out := suite.ExecOn(t, "etcd-d", "sh", "-c", "ls -A /var/lib/etcd 2>/dev/null | wc -l"); strings.TrimSpace(out) != "0" {
		t.Errorf("etcd-d got data from a refused --restore-from: %s", out)
	}

	res := suite.BootstrapJSON(t, dr, "--restore-from", snap)
	if res.ClusterID == "" || res.RestoredRevision < snapRev+restore.DefaultBumpRevision {
		t.Errorf("cluster ID %q, revision %d; want a cluster and revision >= %d + %d", res.ClusterID, res.RestoredRevision, snapRev, restore.DefaultBumpRevision)
	}
	var eps []string
	for _, h := range fresh {
		hh, _ := suite.Lab.Host(h)
		eps = append(eps, "https://"+hh.Address+":2379")
	}
	drc := harness.EtcdClient(t, c.Spec.StateDir, eps...)
	r, err := drc.Get(ctx, "e2e/dr/sentinel")
	if err != nil || r.Count != 1 || string(r.Kvs[0].Value) != "from the old cluster" {
		t.Fatalf("the new cluster lacks the snapshot's data: %v %v", r, err)
	}
	ml, err := drc.MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("member list of the new cluster: %v %v", ml, err)
	}
	for _, m := range ml.Members {
		for _, u := range m.PeerURLs {
			if strings.Contains(u, "172.28.0.11") || strings.Contains(u, "172.28.0.12") || strings.Contains(u, "172.28.0.13") {
				t.Errorf("the new cluster carries an old member's peer URL %s", u)
			}
		}
	}
	// Idempotent afterwards: a plain re-run changes nothing.
	for _, m := range suite.BootstrapJSON(t, dr).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: %s on a re-run, want unchanged", m.Name, m.Action)
		}
	}
}

// saveSnapshot streams a snapshot of cli's first endpoint into a temp file named name and returns
// its path and the revision it holds (nothing is written between the two while the test runs).
func saveSnapshot(t *testing.T, cli *clientv3.Client, name string) (string, int64) {
	t.Helper()
	r, err := cli.Get(context.Background(), "e2e/none")
	if err != nil {
		t.Fatal(err)
	}
	return harness.SaveSnapshot(t, cli, name), r.Header.Revision
}
