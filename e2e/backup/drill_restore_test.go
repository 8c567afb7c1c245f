//go:build e2e

package backupe2e

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/harness"
)

// TestDrillRestore: `hactl drill restore` refuses without a fresh enough snapshot (exit 3, nothing
// touched) and on bad flags (exit 2); with a snapshot taken while its workload writes, it stops every
// member, restores, and reports an RTO and an RPO that the read-back proves: the writes acknowledged
// up to the snapshot are kept, those after it are counted as lost, and the restored cluster takes
// writes again. A budget it misses is exit 3 with the report saying why.
func TestDrillRestore(t *testing.T) {
	objectStore(t)
	c := labSpec(t, "drill-restore")
	c.Spec.Backup.DeltaEvery.Duration = 5 * time.Second // --max-rpo may not be shorter
	spec := harness.WriteSpec(t, c, "cluster.yaml")
	suite.MustHactl(t, "bootstrap", "-f", spec)
	cli := client(t)
	idBefore := clusterID(t, cli)

	wantExit(t, 2, []string{"--max-rpo 0s: must be a positive duration"}, "drill", "restore", "-f", spec, "--max-rpo", "0", "--yes")
	wantExit(t, 2, []string{"--warmup 100ms: at least 1s"}, "drill", "restore", "-f", spec, "--warmup", "100ms", "--yes")
	wantExit(t, 3, []string{"no complete snapshot", "hactl backup now"}, "drill", "restore", "-f", spec, "--yes")
	backupNow(t, spec)
	time.Sleep(6 * time.Second)
	wantExit(t, 3, []string{"longer than --max-rpo 5s", "could only miss the RPO"}, "drill", "restore", "-f", spec, "--max-rpo", "5s", "--yes")
	if id := clusterID(t, cli); id != idBefore {
		t.Fatalf("a refused drill changed the cluster ID %x → %x", idBefore, id)
	}

	// The drill: its workload writes for 10 s before the disaster; a snapshot is taken ~5 s in, so
	// the restore keeps the first half of the writes and loses the rest.
	done := make(chan harness.Result, 1)
	go func() {
		done <- suite.Hactl(t, "drill", "restore", "-f", spec, "--warmup", "10s", "--yes", "-o", "json")
	}()
	time.Sleep(5 * time.Second)
	m := backupNow(t, spec)
	r := <-done
	if r.Code != 0 {
		t.Fatalf("drill restore: exit %d, want 0", r.Code)
	}
	var rep drill.Report
	harness.DecodeJSON(t, r, &rep)
	if rep.Verdict != "pass" || len(rep.Iterations) != 1 || rep.Iterations[0].Restore == nil || rep.Iterations[0].RTOMs == nil {
		t.Fatalf("report: verdict %s, %d iterations; want pass, 1 with restore figures and an RTO", rep.Verdict, len(rep.Iterations))
	}
	it := rep.Iterations[0]
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
	r = wantExit(t, 3, []string{"over --max-rto"}, "drill", "restore", "-f", spec, "--warmup", "2s", "--max-rto", "100ms", "--yes", "-o", "json")
	harness.DecodeJSON(t, r, &rep)
	if rep.Verdict != "fail" || len(rep.Failures) == 0 || !strings.Contains(rep.Failures[0], "over --max-rto") {
		t.Errorf("over budget: verdict %s, failures %v", rep.Verdict, rep.Failures)
	}
}
