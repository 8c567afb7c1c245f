//go:build e2e

package backupe2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/harness"
)

// TestDeltas: `backup schedule --deltas` runs an agent on every member; one writes deltas, and
// another takes over when it stops; a compaction past the chain's end (the agents down) makes the
// next writer take a full snapshot; `restore --from latest` brings the newest full snapshot forward
// with its deltas to exactly the keys the cluster held at the last delta's revision; a chain with a
// missing delta is refused (exit 3) naming the revisions, and --no-deltas restores the full
// snapshot alone; `drill restore` with the agents running restores full + deltas.
func TestDeltas(t *testing.T) {
	ctx := context.Background()
	c, spec := deltaCluster(t, "deltas")
	cli := client(t)
	store, err := backup.OpenStore(ctx, c, backup.StoreOptions{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}

	// Bad input, nothing contacted: deltas not more frequent than the full snapshots.
	wantExit(t, 2, []string{"spec.backup.deltaEvery 5s is not shorter than --every 5s"},
		"backup", "schedule", "-f", spec, "--every", "5s", "--allow-short-interval", "--deltas", "--keep-last", "3", "--yes")

	// Full snapshots every 30 minutes, deltas every 5 s.
	suite.MustHactl(t, "backup", "schedule", "-f", spec, "--every", "30m", "--deltas", "--keep-last", "10", "--yes")
	t.Cleanup(func() { suite.Hactl(t, "backup", "schedule", "-f", spec, "--disable", "--yes") })
	for _, h := range members {
		if st := strings.TrimSpace(suite.ExecOn(t, h, "systemctl", "is-active", schedule.AgentServiceName)); st != "active" {
			t.Fatalf("%s: %s is %s", h, schedule.AgentServiceName, st)
		}
	}
	// --status is green once the agents' first full snapshot is in the bucket (a delta chain
	// starts from one; until then "no complete snapshot" is exit 3): wait for it, then check.
	var status schedule.StatusReport
	harness.WaitFor(t, "backup schedule --status exit 0 (the agents' first full snapshot stored)", time.Minute, time.Second, func() string {
		r := suite.HactlQuiet(t, "backup", "schedule", "-f", spec, "--status", "-o", "json")
		if r.Code != 0 {
			return fmt.Sprintf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
		}
		status = schedule.StatusReport{}
		if err := json.Unmarshal([]byte(r.Stdout), &status); err != nil {
			return err.Error()
		}
		return ""
	})
	for _, h := range status.Hosts {
		if h.AgentState != "active" {
			t.Errorf("--status: %s's agent %q", h.Host, h.AgentState)
		}
	}
	// The timers' slots are wall-clock aligned (:00 and :30): a slot during the test (a clean-clone
	// CI run crossed 13:00) takes a full snapshot past the compaction below, and the agents then
	// rightly start from it instead of hitting the compaction. Only the agents take full snapshots
	// from here on.
	for _, h := range members {
		suite.ExecOn(t, h, "systemctl", "stop", schedule.TimerName)
	}

	n := 0
	write := func(count int) int64 {
		var rev int64
		for range count {
			n++
			resp, err := cli.Put(ctx, fmt.Sprintf("e2e/deltas/%04d", n), fmt.Sprintf("v%d", n))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
			if n%5 == 0 {
				if _, err := cli.Delete(ctx, fmt.Sprintf("e2e/deltas/%04d", n-3)); err != nil {
					t.Fatal(err)
				}
			}
		}
		return rev
	}
	// waitChain waits until the stored deltas reach rev and returns them; when they do not, the
	// agents' journals are logged.
	waitChain := func(rev int64, within time.Duration) []backup.Delta {
		t.Helper()
		var ds []backup.Delta
		reached := false
		defer func() { // also after WaitFor's t.Fatalf (runtime.Goexit runs deferred calls)
			if !reached {
				for _, h := range members {
					out, _ := suite.Lab.Exec(ctx, h, "journalctl", "-u", schedule.AgentServiceName, "--no-pager", "-n", "30")
					t.Logf("%s:\n%s", h, out)
				}
			}
		}()
		harness.WaitFor(t, fmt.Sprintf("a stored delta reaching revision %d", rev), within, 500*time.Millisecond, func() string {
			var err error
			if ds, err = backup.ListDeltas(ctx, store, "deltas", "lab3"); err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 || ds[len(ds)-1].Metadata.ToRevision < rev {
				return fmt.Sprintf("%d deltas, the last ending at revision %d", len(ds), lastTo(ds))
			}
			return ""
		})
		reached = true
		return ds
	}
	ds := waitChain(write(30), 45*time.Second)
	first := ds[len(ds)-1].Metadata.Writer
	t.Logf("%d deltas, written by %s", len(ds), first)

	// The writer's agent stops: another one is elected and continues the chain.
	suite.ExecOn(t, first, "systemctl", "stop", schedule.AgentServiceName)
	ds = waitChain(write(30), 45*time.Second)
	second := ds[len(ds)-1].Metadata.Writer
	if second == first {
		t.Fatalf("the last delta is still %s's after its agent stopped", first)
	}
	if _, err := backup.Chain(ds, ds[0].Metadata.FromRevision); err != nil {
		t.Errorf("the chain across the leader change (%s → %s): %v", first, second, err)
	}
	suite.ExecOn(t, first, "systemctl", "start", schedule.AgentServiceName)

	// Every agent down, writes, a compaction past the chain's end: the next writer cannot watch from
	// where the chain ends and takes a full snapshot.
	for _, h := range members {
		suite.ExecOn(t, h, "systemctl", "stop", schedule.AgentServiceName)
	}
	fulls := len(list(t, spec).Snapshots)
	head := write(20)
	if _, err := cli.Compact(ctx, head); err != nil {
		t.Fatal(err)
	}
	for _, h := range members {
		suite.ExecOn(t, h, "systemctl", "start", schedule.AgentServiceName)
	}
	harness.WaitFor(t, "a full snapshot after a compaction past the chain's end", 45*time.Second, 500*time.Millisecond, func() string {
		if n := len(listQuiet(t, spec).Snapshots); n <= fulls {
			return fmt.Sprintf("%d full snapshot(s), as before the compaction", n)
		}
		return ""
	})
	waitChain(write(30), 45*time.Second)
	waitChain(write(10), 45*time.Second) // at least two deltas after the new full snapshot
	journal := ""
	for _, h := range members {
		journal += suite.ExecOn(t, h, "journalctl", "-u", schedule.AgentServiceName, "--no-pager")
	}
	if !strings.Contains(journal, "hit the compaction") {
		t.Errorf("no agent says it took a full snapshot because of the compaction")
	}

	// Restore from full + deltas: the agents stop once the chain reaches the head, so the chain is
	// fixed; the restored keys are exactly the source's.
	target := write(5)
	ds = waitChain(target, 45*time.Second)
	for _, h := range members {
		suite.ExecOn(t, h, "systemctl", "stop", schedule.AgentServiceName)
	}
	want := keys(t, cli, "e2e/deltas/")
	r := suite.MustHactl(t, "restore", "-f", spec, "--from", "latest", "--force", "--yes")
	if !strings.Contains(r.Stderr, "applying") || !strings.Contains(r.Stderr, "delta(s)") {
		t.Errorf("restore does not say it applied deltas")
	}
	got := keys(t, client(t), "e2e/deltas/")
	if len(got) != len(want) {
		t.Errorf("restored %d keys under e2e/deltas/, the cluster had %d at revision %d", len(got), len(want), target)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: restored %q, want %q", k, got[k], v)
		}
	}

	// A missing delta after the newest full snapshot: refused, naming the revisions.
	l := list(t, spec)
	chain, err := backup.Chain(ds, l.Latest().Metadata.Revision)
	if err != nil || len(chain) < 3 {
		t.Fatalf("chain after the newest full snapshot: %d deltas, %v; want at least 3", len(chain), err)
	}
	gone := chain[1].Metadata
	if err := store.Remove(ctx, gone.MetadataKey); err != nil {
		t.Fatal(err)
	}
	wantExit(t, 3, []string{fmt.Sprintf("no delta holds revisions %d to %d", gone.FromRevision+1, gone.ToRevision), "--no-deltas"},
		"restore", "-f", spec, "--from", "latest", "--force", "--yes")
	suite.MustHactl(t, "restore", "-f", spec, "--from", "latest", "--no-deltas", "--force", "--yes")
	if err := store.Remove(ctx, gone.Key); err != nil {
		t.Fatal(err)
	}

	// drill restore with the agents running: full snapshot + deltas, RPO from the workload's writes.
	suite.MustHactl(t, "backup", "now", "-f", spec)
	for _, h := range members {
		suite.ExecOn(t, h, "systemctl", "restart", schedule.AgentServiceName)
	}
	r = suite.MustHactl(t, "drill", "restore", "-f", spec, "--warmup", "20s", "--max-rpo", "1m", "--yes", "-o", "json")
	var rep drill.Report
	harness.DecodeJSON(t, r, &rep)
	if rep.Verdict != "pass" || len(rep.Iterations) != 1 || rep.Iterations[0].Restore == nil {
		t.Fatalf("drill restore: verdict %s", rep.Verdict)
	}
	x := rep.Iterations[0].Restore
	t.Logf("drill restore with deltas: RTO %.0f ms, RPO %.0f ms (%s), %d deltas, %s", *rep.Iterations[0].RTOMs, x.RPOMs, x.RPOFrom, x.Deltas, x.Verification.Summary)
	if x.Deltas == 0 || x.RPOFrom != "workload" || !x.Verification.OK() {
		t.Errorf("drill restore with deltas: %d deltas applied, RPO from %q, read-back %s", x.Deltas, x.RPOFrom, x.Verification.Summary)
	}
	wantExit(t, 2, []string{"--max-rpo 2s is shorter than spec.backup.deltaEvery 5s"}, "drill", "restore", "-f", spec, "--max-rpo", "2s", "--yes")
}

// lastTo is the revision the last of ds ends at (0 for none).
func lastTo(ds []backup.Delta) int64 {
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)-1].Metadata.ToRevision
}

// keys returns every key under prefix with its value.
func keys(t *testing.T, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}
