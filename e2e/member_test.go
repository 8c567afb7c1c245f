//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/etcd/maintenance"
	"github.com/hactl/hactl/etcd/membership"
)

// TestMemberRemove: under the drills' writer, on the 5-member cluster, `hactl etcd member remove`
// takes out a follower and then the leader (leadership moved first), each host's unit stopped and
// disabled and its data dir kept aside; a removal that would lose the quorum is refused (exit 2) with
// the arithmetic; no acknowledged write is lost; and the next bootstrap adds both hosts back as new
// members.
func TestMemberRemove(t *testing.T) {
	ctx := context.Background()
	spec := specPath(t, 5)
	suite.BootstrapJSON(t, spec)
	rep := waitHealthy(t, spec, 30*time.Second)
	hosts := []string{"cp-a", "cp-b", "cp-c", "etcd-d", "etcd-e"}
	var endpoints []string
	for _, h := range hosts {
		endpoints = append(endpoints, suite.Endpoint(t, h))
	}
	cli := harness.EtcdClient(t, labSpec(t, 5).Spec.StateDir, endpoints...)
	run, err := workload.Start(ctx, workload.Config{Client: cli, Prefix: "/hactl-e2e/member-remove/" + time.Now().UTC().Format("150405") + "/", Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() *workload.Record {
		stopped = true
		return run.Stop()
	}
	t.Cleanup(func() {
		if !stopped {
			run.Stop()
		}
	})

	if r := suite.Hactl(t, "etcd", "member", "remove", "etcd-z", "-f", spec, "--yes"); r.Code != 2 || !strings.Contains(r.Stderr, "etcd-z is not a member") {
		t.Errorf("remove etcd-z: exit %d, want 2 naming it:\n%s", r.Code, r.Stderr)
	}
	if r := suite.Hactl(t, "etcd", "member", "remove", "etcd-e", "-f", spec); r.Code != 2 || !strings.Contains(r.Stderr, "--yes") {
		t.Errorf("remove without --yes, stdin no terminal: exit %d, want 2:\n%s", r.Code, r.Stderr)
	}

	remove := func(name string) membership.RemoveResult {
		t.Helper()
		r := suite.MustHactl(t, "etcd", "member", "remove", name, "-f", spec, "--yes", "-o", "json")
		var res membership.RemoveResult
		if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
			t.Fatalf("remove %s: %v\n%s", name, err, r.Stdout)
		}
		if !res.Removed || !strings.HasPrefix(res.DataDirAside, "/var/lib/etcd.removed-") || res.HostError != "" {
			t.Errorf("remove %s: %+v", name, res)
		}
		if out := suite.ExecOn(t, name, "sh", "-c", "systemctl is-enabled etcd.service; systemctl is-active etcd.service; test -d "+res.DataDirAside+" && echo kept"); strings.TrimSpace(out) != "disabled\ninactive\nkept" {
			t.Errorf("%s after removal: %q, want the unit disabled and inactive and the data dir kept", name, out)
		}
		return res
	}
	follower := ""
	for _, m := range rep.Etcd.Members {
		if m.Name != rep.Etcd.LeaderName && slices.Contains([]string{"etcd-d", "etcd-e"}, m.Name) {
			follower = m.Name
		}
	}
	if follower == "" {
		t.Fatalf("no follower among etcd-d and etcd-e: %+v", rep.Etcd.Members)
	}
	if res := remove(follower); res.WasLeader {
		t.Errorf("%s was a follower, the result says leader", follower)
	}
	leader := waitHealthyMembers(t, spec, 4).Etcd.LeaderName
	res := remove(leader)
	if !res.WasLeader || res.NewLeader == "" || res.NewLeader == leader {
		t.Errorf("remove the leader %s: %+v", leader, res)
	}
	left := waitHealthyMembers(t, spec, 3)

	// With one of the three stopped, removing another healthy one would leave 2 voters, 1 healthy.
	var others []string
	for _, m := range left.Etcd.Members {
		others = append(others, m.Name)
	}
	suite.ExecOn(t, others[0], "systemctl", "stop", "etcd.service")
	r := suite.Hactl(t, "etcd", "member", "remove", others[1], "-f", spec, "--yes")
	suite.ExecOn(t, others[0], "systemctl", "start", "etcd.service")
	if r.Code != 2 || !strings.Contains(r.Stderr, "bring "+others[0]+" back first") || !strings.Contains(r.Stderr, "⌊2/2⌋+1") {
		t.Errorf("remove %s with %s down: exit %d, want 2 with the arithmetic:\n%s", others[1], others[0], r.Code, r.Stderr)
	}
	waitHealthyMembers(t, spec, 3)

	rec := stop()
	v, err := workload.Verify(ctx, cli, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		t.Errorf("acknowledged writes lost or stale reads: %+v", v)
	}
	st := rec.Stats(time.Time{})
	t.Logf("writer: %d acknowledged, longest write gap %s", st.Acked, st.LongestGap)

	// The spec still lists both: the next bootstrap adds them back as new members.
	suite.BootstrapJSON(t, spec)
	waitHealthy(t, spec, time.Minute)
}

// waitHealthyMembers waits until the cluster has n members, a leader, and every member's endpoint
// healthy. (hactl status itself exits 3 meanwhile: the spec still lists the removed hosts.)
func waitHealthyMembers(t *testing.T, spec string, n int) statusReport {
	t.Helper()
	var rep statusReport
	harness.WaitFor(t, "the expected members, all healthy, with a leader", time.Minute, 2*time.Second, func() string {
		var r harness.Result
		rep, r = status(t, spec)
		healthy := 0
		for _, m := range rep.Etcd.Members {
			for _, ep := range rep.Etcd.Endpoints {
				if ep.MemberName == m.Name && ep.Healthy && !m.IsLearner {
					healthy++
				}
			}
		}
		if len(rep.Etcd.Members) == n && healthy == n && rep.Etcd.LeaderName != "" {
			return ""
		}
		return r.Stdout
	})
	return rep
}

// TestEtcdMaintenance: under the drills' writer, history written and deleted, then `hactl etcd
// compact` and `hactl etcd defrag` (followers first, the leader last) give the space back, status
// shows each member's free share, `alarm list` has none; nothing acknowledged is lost.
func TestEtcdMaintenance(t *testing.T) {
	ctx := context.Background()
	spec := specPath(t, 5)
	suite.BootstrapJSON(t, spec)
	waitHealthy(t, spec, time.Minute)
	var endpoints []string
	for _, h := range []string{"cp-a", "cp-b", "cp-c", "etcd-d", "etcd-e"} {
		endpoints = append(endpoints, suite.Endpoint(t, h))
	}
	cli := harness.EtcdClient(t, labSpec(t, 5).Spec.StateDir, endpoints...)
	value := strings.Repeat("v", 32<<10)
	for i := range 600 { // ~19 MiB of history
		if _, err := cli.Put(ctx, "/hactl-e2e/frag/"+strconv.Itoa(i), value); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "/hactl-e2e/frag/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	run, err := workload.Start(ctx, workload.Config{Client: cli, Prefix: "/hactl-e2e/maintenance/" + time.Now().UTC().Format("150405") + "/", Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if run != nil {
			run.Stop()
		}
	}()

	for _, args := range [][]string{{"etcd", "defrag", "--min-fragmentation", "101"}, {"etcd", "compact", "--retain", "-1"}} {
		if r := suite.Hactl(t, append(args, "-f", spec, "--yes")...); r.Code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, r.Code, r.Stderr)
		}
	}
	var compact maintenance.CompactResult
	// --retain 0: the deletions are the newest revisions, and a compaction keeps each key's latest
	// revision at or before the one compacted to, so only compacting past them frees the values.
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "compact", "-f", spec, "--retain", "0", "--yes", "-o", "json"), &compact)
	if compact.CompactedTo != compact.Revision || compact.Skipped != "" {
		t.Errorf("compact: %+v", compact)
	}
	var defrag maintenance.DefragResult
	// --min-fragmentation 0: etcd's in-use figure counts the pages a compaction just freed only
	// later (bbolt's pending pages), so right after one the free share it reports can lag.
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "defrag", "-f", spec, "--yes", "-o", "json"), &defrag)
	if n := len(defrag.Members); n != 5 || !defrag.Members[n-1].Leader {
		t.Fatalf("defrag order: %+v, want 5 members, the leader last", defrag.Members)
	}
	for _, m := range defrag.Members {
		if m.Skipped != "" || m.AfterBytes*2 >= m.BeforeBytes {
			t.Errorf("%s: %.1f%% free, %d → %d bytes, skipped %q", m.Name, m.FragmentationPercent, m.BeforeBytes, m.AfterBytes, m.Skipped)
		}
	}
	rep, _ := status(t, spec)
	// In bytes, not percent: the database is ~0.1 MiB after the defrag, where the writer's few
	// freed pages are a large share.
	for _, ep := range rep.Etcd.Endpoints {
		if free := ep.DBSizeBytes - ep.DBSizeInUseBytes; free > 1<<20 {
			t.Errorf("%s: %d bytes free after the defrag (%.1f%%), want under 1 MiB", ep.MemberName, free, ep.FragmentationPercent)
		}
	}
	var again maintenance.DefragResult
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "defrag", "-f", spec, "--min-fragmentation", "50", "--yes", "-o", "json"), &again)
	for _, m := range again.Members {
		if m.Skipped == "" {
			t.Errorf("%s defragmented again at %.1f%% free (--min-fragmentation 50)", m.Name, m.FragmentationPercent)
		}
	}
	if r := suite.MustHactl(t, "etcd", "alarm", "list", "-f", spec, "-o", "json"); strings.TrimSpace(r.Stdout) != "[]" {
		t.Errorf("alarm list: %s", r.Stdout)
	}

	rec := run.Stop()
	run = nil
	v, err := workload.Verify(ctx, cli, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		t.Errorf("acknowledged writes lost or stale reads: %+v", v)
	}
	st := rec.Stats(time.Time{})
	t.Logf("writer: %d acknowledged during compact and defrag, longest write gap %s", st.Acked, st.LongestGap)
	for _, m := range defrag.Members {
		t.Logf("defrag %s: %.1f MiB → %.1f MiB in %.0f ms", m.Name, float64(m.BeforeBytes)/(1<<20), float64(m.AfterBytes)/(1<<20), m.DurationMs)
	}
}

// TestEtcdNoSpace: with a 16 MiB quota, history fills the database until etcd raises NOSPACE and
// refuses writes; `hactl etcd alarm list` names it, `alarm disarm` compacts, defragments every member
// and disarms, and writes go through again. The quota is put back after.
func TestEtcdNoSpace(t *testing.T) {
	ctx := context.Background()
	c := labSpec(t, 5)
	c.Spec.Etcd.QuotaBackendBytes = 16 << 20
	small := harness.WriteSpecIn(t, suite.Lab.Dir(), c, "etcd-5-quota.yaml")
	spec := specPath(t, 5)
	t.Cleanup(func() { suite.BootstrapJSON(t, spec) }) // the default quota again (a rolling restart)
	suite.BootstrapJSON(t, small)
	waitHealthy(t, small, time.Minute)
	var endpoints []string
	for _, h := range []string{"cp-a", "cp-b", "cp-c", "etcd-d", "etcd-e"} {
		endpoints = append(endpoints, suite.Endpoint(t, h))
	}
	cli := harness.EtcdClient(t, c.Spec.StateDir, endpoints...)
	value := strings.Repeat("q", 1<<20)
	full := false
	for i := 0; i < 40 && !full; i++ {
		if _, err := cli.Put(ctx, "/hactl-e2e/nospace", value); err != nil {
			if !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatalf("put %d: %v", i, err)
			}
			full = true
		}
	}
	if !full {
		t.Fatal("40 MiB of history did not raise NOSPACE under a 16 MiB quota")
	}
	var alarms []maintenance.Alarm
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "alarm", "list", "-f", small, "-o", "json"), &alarms)
	if len(alarms) == 0 || alarms[0].Alarm != "NOSPACE" || alarms[0].Member == "" {
		t.Fatalf("alarm list: %+v, want NOSPACE with its member", alarms)
	}
	if r := suite.Hactl(t, "etcd", "alarm", "disarm", "-f", small); r.Code != 2 {
		t.Errorf("disarm without --yes, stdin no terminal: exit %d, want 2", r.Code)
	}
	var res maintenance.DisarmResult
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "alarm", "disarm", "-f", small, "--yes", "-o", "json"), &res)
	if res.Compact == nil || res.Defrag == nil || len(res.Defrag.Members) != 5 || len(res.Disarmed) == 0 || len(res.Remaining) != 0 {
		t.Fatalf("disarm: %+v", res)
	}
	if _, err := cli.Put(ctx, "/hactl-e2e/after-nospace", "ok"); err != nil {
		t.Fatalf("put after the recovery: %v", err)
	}
	if r := suite.MustHactl(t, "etcd", "alarm", "list", "-f", small, "-o", "json"); strings.TrimSpace(r.Stdout) != "[]" {
		t.Errorf("alarms after disarm: %s", r.Stdout)
	}
	if _, err := cli.Delete(ctx, "/hactl-e2e/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}
