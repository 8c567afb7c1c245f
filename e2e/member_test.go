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

	"github.com/hactl/hactl/api/v1alpha1"
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
	// The leader may be any member, so the three left may hold two of one zone: the zone rule is
	// accepted here (a warning) and tested in TestMemberReplace.
	c5 := labSpec(t, 5)
	c5.Spec.Etcd.AcceptZoneQuorumLoss = true
	spec := harness.WriteSpecIn(t, suite.Lab.Dir(), c5, "etcd-5-zones-accepted.yaml")
	suite.BootstrapJSON(t, spec)
	rep := waitHealthy(t, spec, 30*time.Second)
	w := startWriter(t, "member-remove", 5)

	if r := suite.Hactl(t, "etcd", "member", "remove", "etcd-z", "-f", spec, "--yes"); r.Code != 2 || !strings.Contains(r.Stderr, "etcd-z is not a member") {
		t.Errorf("remove etcd-z: exit %d, want 2 naming it:\n%s", r.Code, r.Stderr)
	}
	if r := suite.Hactl(t, "etcd", "member", "remove", "etcd-e", "-f", spec); r.Code != 2 || !strings.Contains(r.Stderr, "--yes") {
		t.Errorf("remove without --yes, stdin no terminal: exit %d, want 2:\n%s", r.Code, r.Stderr)
	}

	remove := func(name string) membership.RemoveResult {
		t.Helper()
		r := suite.MustHactl(t, "etcd", "member", "remove", name, "-f", spec, "--yes", "-o", "json")
		var shrink membership.ShrinkResult
		if err := json.Unmarshal([]byte(r.Stdout), &shrink); err != nil || len(shrink.Removals) != 1 {
			t.Fatalf("remove %s: %v\n%s", name, err, r.Stdout)
		}
		res := *shrink.Removals[0]
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

	w.Verify("during the removals")

	// The spec still lists both: the next bootstrap adds them back as new members.
	suite.BootstrapJSON(t, spec)
	waitHealthy(t, spec, time.Minute)
}

// specWithout writes the lab's 5-host spec without the hosts drop (their host entries gone, as
// when a host died or was handed back) to <lab dir>/name.
func specWithout(t *testing.T, name string, drop ...string) string {
	t.Helper()
	c := labSpec(t, 5)
	c.Spec.Hosts = slices.DeleteFunc(c.Spec.Hosts, func(h v1alpha1.Host) bool { return slices.Contains(drop, h.Name) })
	return harness.WriteSpecIn(t, suite.Lab.Dir(), c, name)
}

// TestMemberReplace: under the drills' writer, on the 5-member cluster: a shrink that would leave a
// zone holding a quorum is refused (exit 2); 5→3 removes etcd-d and etcd-e one at a time; then
// `hactl etcd member replace` puts members onto the freed hosts: cp-a dead (remove first: etcd
// refuses an add without a quorum of 4 healthy) onto etcd-d, and cp-b alive (add first, the voters
// never fewer than 3) onto etcd-e; bad --with values are refused (exit 2); no acknowledged write
// is lost. The 5-member cluster is put back after.
func TestMemberReplace(t *testing.T) {
	spec5 := specPath(t, 5)
	t.Cleanup(func() {
		// The replaced hosts get their etcd back as new members of the 5-member spec: cp-a's and
		// cp-b's units were never retired by hactl (their host entries were gone).
		for _, h := range []string{"cp-a", "cp-b"} {
			suite.ExecOn(t, h, "sh", "-c", "systemctl disable --now etcd.service; test ! -d /var/lib/etcd || mv -T /var/lib/etcd /var/lib/etcd.e2e-replaced-$(date +%s)")
		}
		suite.BootstrapJSON(t, spec5)
		waitHealthy(t, spec5, 2*time.Minute)
	})
	suite.BootstrapJSON(t, spec5)
	waitHealthy(t, spec5, time.Minute)
	w := startWriter(t, "member-replace", 5)

	// Shrink 5→3. cp-b and etcd-e would leave cp-a and etcd-d: az-a with 2 of 3.
	if r := suite.Hactl(t, "etcd", "member", "remove", "cp-b", "etcd-e", "-f", spec5, "--yes"); r.Code != 2 || !strings.Contains(r.Stderr, `zone "az-a" holds 2 of the 3 voting members`) {
		t.Errorf("remove cp-b etcd-e: exit %d, want 2 with the zone rule:\n%s", r.Code, r.Stderr)
	}
	var plan membership.ShrinkResult
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "member", "remove", "etcd-d", "etcd-e", "-f", spec5, "--dry-run", "-o", "json"), &plan)
	left := slices.Sorted(slices.Values(plan.Remaining))
	if !slices.Equal(left, []string{"cp-a", "cp-b", "cp-c"}) || len(plan.Removals) != 0 || len(plan.Order) != 2 {
		t.Errorf("dry run: %+v", plan)
	}
	var shrink membership.ShrinkResult
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "member", "remove", "etcd-d", "etcd-e", "-f", spec5, "--yes", "-o", "json"), &shrink)
	if len(shrink.Removals) != 2 || !shrink.Removals[0].Removed || !shrink.Removals[1].Removed {
		t.Fatalf("remove etcd-d etcd-e: %+v", shrink)
	}
	waitHealthyMembers(t, spec5, 3)

	// cp-a's host dies; the spec drops it and names etcd-d (az-a) as the etcd host instead.
	specD := specWithout(t, "etcd-replaced-d.yaml", "cp-a", "etcd-e")
	for _, tc := range []struct{ with, want string }{
		{"cp-b", "cp-b"}, // a member already
		{"etcd-x", "--with must name a host of the spec"},
	} {
		if r := suite.Hactl(t, "etcd", "member", "replace", "cp-a", "--with", tc.with, "-f", specD, "--yes"); r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("replace cp-a --with %s: exit %d, want 2 with %q:\n%s", tc.with, r.Code, tc.want, r.Stderr)
		}
	}
	suite.ExecOn(t, "cp-a", "systemctl", "stop", "etcd.service")
	var dead membership.ReplaceResult
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "member", "replace", "cp-a", "--with", "etcd-d", "-f", specD, "--yes", "-o", "json"), &dead)
	if !dead.Joined || dead.Order != membership.OrderRemoveFirst || dead.Removal == nil || !dead.Removal.Removed {
		t.Errorf("replace dead cp-a by etcd-d: %+v", dead)
	}
	waitHealthy(t, specD, time.Minute)

	// cp-b is alive: etcd-e joins first, then cp-b is removed.
	specE := specWithout(t, "etcd-replaced-e.yaml", "cp-a", "cp-b")
	var alive membership.ReplaceResult
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "member", "replace", "cp-b", "--with", "etcd-e", "-f", specE, "--yes", "-o", "json"), &alive)
	if !alive.Joined || alive.Order != membership.OrderAddFirst || alive.Removal == nil || !alive.Removal.Removed || alive.Removal.WasLeader && alive.Removal.NewLeader == "" {
		t.Errorf("replace live cp-b by etcd-e: %+v", alive)
	}
	// specE has no host entry for cp-b, so hactl could not retire it (and says so): the test does.
	if alive.Removal != nil && !strings.Contains(alive.Removal.HostError, "not a host of the spec") {
		t.Errorf("cp-b's host error: %q, want it to say cp-b is no host of the spec", alive.Removal.HostError)
	}
	suite.ExecOn(t, "cp-b", "systemctl", "disable", "--now", "etcd.service")
	rep := waitHealthy(t, specE, time.Minute)
	var names []string
	for _, m := range rep.Etcd.Members {
		names = append(names, m.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"cp-c", "etcd-d", "etcd-e"}) {
		t.Errorf("members after the replacements: %v", names)
	}
	w.Verify("during the shrink and both replacements")
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
	w := startWriter(t, "maintenance", 5)
	cli := w.Client
	value := strings.Repeat("v", 32<<10)
	for i := range 600 { // ~19 MiB of history
		if _, err := cli.Put(ctx, "/hactl-e2e/frag/"+strconv.Itoa(i), value); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "/hactl-e2e/frag/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
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
	if len(rep.Etcd.Endpoints) != len(defrag.Members) {
		t.Errorf("status after the defrag: %d endpoints, want %d", len(rep.Etcd.Endpoints), len(defrag.Members))
	}
	// In bytes, not percent: the database is ~0.1 MiB after the defrag, where the writer's few
	// freed pages are a large share.
	for _, ep := range rep.Etcd.Endpoints {
		if free := ep.DBSizeBytes - ep.DBSizeInUseBytes; free > 1<<20 {
			t.Errorf("%s: %d bytes free after the defrag (%.1f%%), want under 1 MiB", ep.MemberName, free, ep.FragmentationPercent)
		}
	}
	var again maintenance.DefragResult
	harness.DecodeJSON(t, suite.MustHactl(t, "etcd", "defrag", "-f", spec, "--min-fragmentation", "50", "--yes", "-o", "json"), &again)
	if len(again.Members) != len(defrag.Members) {
		t.Errorf("defrag --min-fragmentation 50: %d members, want %d, each skipped", len(again.Members), len(defrag.Members))
	}
	for _, m := range again.Members {
		if m.Skipped == "" {
			t.Errorf("%s defragmented again at %.1f%% free (--min-fragmentation 50)", m.Name, m.FragmentationPercent)
		}
	}
	if r := suite.MustHactl(t, "etcd", "alarm", "list", "-f", spec, "-o", "json"); strings.TrimSpace(r.Stdout) != "[]" {
		t.Errorf("alarm list: %s", r.Stdout)
	}

	w.Verify("during compact and defrag")
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
