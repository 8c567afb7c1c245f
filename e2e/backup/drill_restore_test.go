//go:build e2e

package backupe2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/harness"
)

// TestDrillRestore: `hactl drill restore` refuses without a fresh enough snapshot (exit 3, nothing
// touched) and on bad flags (exit 2); with a snapshot taken while its workload writes, it stops every
// member, restores, and reports an RTO and an RPO that the read-back proves: the writes acknowledged
// up to the snapshot are kept, those after it are counted as lost, and the restored cluster takes
// writes again. A budget it misses is exit 3 with the report saying why.
func TestDrillRestore(t *testing.T) {
	_, spec := deltaCluster(t, "drill-restore")
	cli := client(t)
	idBefore := clusterID(t, cli)

	wantExit(t, 2, []string{"--max-rpo 0s: must be a positive duration"}, "drill", "restore", "-f", spec, "--max-rpo", "0", "--yes")
	wantExit(t, 2, []string{"--warmup 100ms: at least 1s"}, "drill", "restore", "-f", spec, "--warmup", "100ms", "--yes")
	wantExit(t, 3, []string{"no complete snapshot", "hactl backup now"}, "drill", "restore", "-f", spec, "--yes")
	// The snapshot ages past --max-rpo: its age is counted from its start as its metadata records
	// it (whole seconds, by this machine's clock, where hactl runs), so the clock is the condition.
	aged := backupNow(t, spec)
	time.Sleep(time.Until(aged.StartedAt.Add(5*time.Second + 500*time.Millisecond)))
	wantExit(t, 3, []string{"longer than --max-rpo 5s", "could only miss the RPO"}, "drill", "restore", "-f", spec, "--max-rpo", "5s", "--yes")
	if id := clusterID(t, cli); id != idBefore {
		t.Fatalf("a refused drill changed the cluster ID %x → %x", idBefore, id)
	}

	// The drill: its workload writes for 10 s before the disaster; a snapshot is taken ~4 s in, so
	// the restore keeps the first part of the writes and loses the rest.
	left := drillKeys(t, cli) // an interrupted drill's keys, if any: not this drill's writes
	done, finished := make(chan harness.Result, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- suite.Hactl(t, "drill", "restore", "-f", spec, "--warmup", "10s", "--yes", "-o", "json")
	}()
	t.Cleanup(func() { <-finished }) // a test failing before <-done still lets the drill end (and log)
	waitWorkload(t, cli, left, done)
	// Not a synchronisation but where the snapshot falls in the 10 s warmup, counted from its
	// first write: writes on both sides of it, and an RPO well within the warmup.
	time.Sleep(4 * time.Second)
	m := backupNow(t, spec)
	rep, it := passedRestore(t, <-done)
	x := it.Restore
	v := x.Verification
	t.Logf("RTO %.0f ms (fetch %.0f, restore %.0f), RPO %.0f ms (%s), snapshot age %.0f ms, %s", *it.RTOMs, x.FetchMs, x.RestoreMs, x.RPOMs, x.RPOFrom, x.SnapshotAgeMs, v.Summary)
	if x.Snapshot.Key != m.Key {
		t.Errorf("restored from %s, want the newest snapshot %s", x.Snapshot.Key, m.Key)
	}
	if x.RPOFrom != "workload" || x.RPOMs <= 0 || x.RPOMs > 10_000 {
		t.Errorf("RPO %.0f ms from %q: want from the workload's writes, within the 10 s warmup", x.RPOMs, x.RPOFrom)
	}
	if !v.OK() || v.HeldBefore == 0 || v.LostBefore == 0 || x.LostWrites != v.LostBefore || v.HeldAfter == 0 {
		t.Errorf("read-back: %s; want writes kept and lost before t0, and kept after", v.Summary)
	}
	if *it.RTOMs <= 0 || *it.RTOMs > 120_000 { // writes resume once quorum is back, before the restore's last checks return
		t.Errorf("RTO %.0f ms: want within the 2 min budget", *it.RTOMs)
	}
	cli2 := client(t)
	if id := clusterID(t, cli2); id == idBefore {
		t.Errorf("cluster ID %x unchanged: the drill did not restore", id)
	}
	for _, h := range members {
		if out := suite.ExecOn(t, h, "sh", "-c", "ls -d /var/lib/etcd.pre-restore-*"); !strings.Contains(out, "/var/lib/etcd.pre-restore-") {
			t.Errorf("%s: no data dir kept aside: %q", h, out)
		}
		if out := suite.ExecOn(t, h, "systemctl", "is-active", "etcd"); strings.TrimSpace(out) != "active" {
			t.Errorf("%s: etcd %s after the drill", h, out)
		}
	}
	if resp, err := cli2.Get(context.Background(), "/hactl-drill/"+rep.ID+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("workload keys left under /hactl-drill/%s/: %v %v", rep.ID, resp, err)
	}

	// A budget the restore cannot meet: exit 3, the report says so.
	r := wantExit(t, 3, []string{"over --max-rto"}, "drill", "restore", "-f", spec, "--warmup", "2s", "--max-rto", "100ms", "--yes", "-o", "json")
	harness.DecodeJSON(t, r, &rep)
	if rep.Verdict != "fail" || len(rep.Failures) == 0 || !strings.Contains(rep.Failures[0], "over --max-rto") {
		t.Errorf("over budget: verdict %s, failures %v", rep.Verdict, rep.Failures)
	}
}

// TestDrillRestoreOnto: `hactl drill restore --onto dr.yaml` fences the members, kills them, builds a
// new cluster from the newest snapshot on three other hosts (lb-a, lb-b, spare-c; its own state dir)
// and measures RTO/RPO there; afterwards the old members are unfenced and the old cluster runs as
// before (its data dirs untouched). Bad --onto specs are exit 2 before any host is contacted, and
// hosts that are no longer new are refused by the preflight before anything is touched.
func TestDrillRestoreOnto(t *testing.T) {
	ctx := context.Background()
	_, spec := deltaCluster(t, "drill-onto")
	cli := client(t)
	idBefore := clusterID(t, cli)
	if _, err := cli.Put(ctx, "e2e/onto/sentinel", "from the old cluster"); err != nil {
		t.Fatal(err)
	}

	// The new site: lb-a (az-a), lb-b (az-b), spare-c (az-c) as etcd members, their own state dir.
	dr := labSpec(t, "drill-onto")
	dr.Metadata.Name = "dr"
	dr.Spec.StateDir = filepath.Join(t.TempDir(), "state-dr")
	dr.Spec.Backup = nil
	dr.Spec.Hosts = nil
	for _, name := range []string{"lb-a", "lb-b", "spare-c"} {
		h, err := suite.Lab.Host(name)
		if err != nil {
			t.Fatal(err)
		}
		dr.Spec.Hosts = append(dr.Spec.Hosts, v1alpha1.Host{Name: h.Name, Address: h.Address, Zone: h.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	}
	drFile := harness.WriteSpec(t, dr, "dr.yaml")

	// Bad input: exit 2, nothing contacted.
	overlap := *dr
	overlap.Spec.Hosts = append([]v1alpha1.Host{}, dr.Spec.Hosts...)
	cpA, _ := suite.Lab.Host("cp-a")
	overlap.Spec.Hosts[0] = v1alpha1.Host{Name: "cp-a", Address: cpA.Address, Zone: cpA.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}}
	wantExit(t, 2, []string{"spec.hosts[0] (cp-a", "OTHER hosts"}, "drill", "restore", "-f", spec, "--onto", harness.WriteSpec(t, &overlap, "overlap.yaml"), "--yes")
	wantExit(t, 2, []string{"--keep-fenced"}, "drill", "restore", "-f", spec, "--keep-fenced", "--yes")

	backupNow(t, spec)
	_, it := passedRestore(t, suite.Hactl(t, "drill", "restore", "-f", spec, "--onto", drFile, "--warmup", "3s", "--yes", "-o", "json"))
	x := it.Restore
	t.Logf("onto %s: RTO %.0f ms (fetch %.0f, restore %.0f), RPO %.0f ms (%s), %s; notes %v", x.Onto, *it.RTOMs, x.FetchMs, x.RestoreMs, x.RPOMs, x.RPOFrom, x.Verification.Summary, it.Notes)
	if x.Onto != "dr" || len(x.Fenced) != 0 {
		t.Errorf("restored onto %q, fenced %v; want dr and none left fenced", x.Onto, x.Fenced)
	}
	if !x.Verification.OK() || x.Verification.HeldAfter == 0 {
		t.Errorf("read-back: %s; want the new cluster to hold what it acknowledged", x.Verification.Summary)
	}
	if *it.RTOMs <= 0 || *it.RTOMs > 120_000 {
		t.Errorf("RTO %.0f ms: want within the 2 min budget", *it.RTOMs)
	}

	// The new cluster: three members on the new hosts, the old cluster's data.
	var eps []string
	for _, h := range dr.Spec.Hosts {
		eps = append(eps, "https://"+h.Address+":2379")
	}
	drc := harness.EtcdClient(t, dr.Spec.StateDir, eps...)
	if g, err := drc.Get(ctx, "e2e/onto/sentinel"); err != nil || g.Count != 1 || string(g.Kvs[0].Value) != "from the old cluster" {
		t.Errorf("the new cluster lacks the snapshot's data: %v %v", g, err)
	}
	if ml, err := drc.MemberList(ctx); err != nil || len(ml.Members) != 3 || ml.Header.ClusterId == idBefore {
		t.Errorf("new cluster's member list: %v %v; want 3 members, another cluster ID than %x", ml, err, idBefore)
	}
	// The old one: unfenced, running, the same cluster, its data dirs never moved.
	for _, h := range members {
		if out := suite.ExecOn(t, h, "sh", "-c", "systemctl is-active etcd; ls "+drill.FenceDropIn+" 2>&1; ls -d /var/lib/etcd.pre-restore-* 2>/dev/null | wc -l"); !strings.HasPrefix(out, "active\n") || !strings.Contains(out, "No such file") {
			t.Errorf("%s after the drill: %q; want etcd active and no fence", h, out)
		}
	}
	if id := clusterID(t, client(t)); id != idBefore {
		t.Errorf("the old cluster's ID changed %x → %x: --onto must not touch it", idBefore, id)
	}

	// Run again: the new hosts now hold a cluster, the preflight refuses before anything is touched.
	before := suite.UnitStarts(t, members)
	r := suite.Hactl(t, "drill", "restore", "-f", spec, "--onto", drFile, "--yes")
	if r.Code != 1 || !strings.Contains(r.Stderr, "--onto") {
		t.Errorf("drill restore --onto hosts that are not new: exit %d, want 1 from the preflight\n%s", r.Code, r.Stderr)
	}
	if after := suite.UnitStarts(t, members); !maps.Equal(before, after) {
		t.Errorf("a refused drill restarted etcd: %v → %v", before, after)
	}
}

// drillKeys counts the keys under /hactl-drill/ (the drills' workloads). An error fails the test.
func drillKeys(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	n, err := countDrillKeys(cli)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countDrillKeys(cli *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/hactl-drill/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// waitWorkload waits until a drill started in the background (its result comes on done) has its
// workload's first write acknowledged (more keys under /hactl-drill/ than left were there before it
// started: its preflight passed and its warmup began). A drill that ends first fails the test with
// its result.
func waitWorkload(t *testing.T, cli *clientv3.Client, left int64, done <-chan harness.Result) {
	t.Helper()
	harness.WaitFor(t, "the drill's workload writing under /hactl-drill/", 2*time.Minute, 100*time.Millisecond, func() string {
		select {
		case r := <-done:
			t.Fatalf("drill restore ended before its workload wrote: exit %d\n%s", r.Code, r)
		default:
		}
		n, err := countDrillKeys(cli)
		switch {
		case err != nil:
			return err.Error()
		case n <= left:
			return fmt.Sprintf("%d key(s), as many as before the drill", n)
		}
		return ""
	})
}

// passedRestore decodes a drill restore's JSON report and fails the test unless it exited 0 with a
// passing verdict, one iteration, restore figures and an RTO.
func passedRestore(t *testing.T, r harness.Result) (drill.Report, drill.Iteration) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("drill restore: exit %d, want 0", r.Code)
	}
	var rep drill.Report
	harness.DecodeJSON(t, r, &rep)
	if rep.Verdict != "pass" || len(rep.Iterations) != 1 || rep.Iterations[0].Restore == nil || rep.Iterations[0].RTOMs == nil {
		t.Fatalf("report: verdict %s, %d iterations; want pass, 1 with restore figures and an RTO", rep.Verdict, len(rep.Iterations))
	}
	return rep, rep.Iterations[0]
}
