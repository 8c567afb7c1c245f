//go:build e2e

package kubee2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/operator/observe"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/status"
)

// testOperatorHeal is TestKube's heal phase, the last (TestKube's order): it destroys cp-c's host
// for good. The spec gets the lab's spare-c (zone az-c) in spec.etcd.spares, as a
// user writes it; `hactl operator deploy --auto-replace --grace-period 20s` refuses bad flags
// (exit 2), then issues spare-c's certificates and pins its host key. cp-c's etcd stopped and
// started again within the grace period is not healed. Under the drills' writer,
// cp-c's container is killed (docker kill: the host is gone): the operator waits out the grace
// period, removes cp-c's member (a 3-member cluster with one down: etcd refuses the add first),
// installs etcd on spare-c over SSH, adds it as a learner, starts it, promotes it once caught up,
// and records it: spec.members holds spare-c in cp-c's place, the spare pool is empty, the
// Healing condition and an event say what to change in cluster.yaml. etcd has three healthy voting
// members again and no acknowledged write was lost. The operator's leader is force-deleted in the
// middle of the heal; the new leader finishes it from the recorded step. Afterwards status reports
// the drift (exit 3), plan refuses with it, and operator adopt records the new member.
func testOperatorHeal(t *testing.T) {
	ctx := context.Background()
	base := suite.Lab.SpecPath(3)
	c := labSpec(t)
	sp, err := suite.Lab.Host(lab.SpareHosts[0])
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Etcd.Spares = []v1alpha1.Spare{{Name: sp.Name, Address: sp.Address, Zone: sp.Zone}}
	spec := harness.WriteSpecIn(t, suite.Lab.Dir(), c, "cluster-heal.yaml")
	name := c.Metadata.Name
	archive := operatorArchive(t)
	suite.BootstrapJSON(t, base)
	suite.MustHactl(t, "kubeconfig", "-f", base, "--out", suite.Lab.Kubeconfig())
	t.Cleanup(func() { suite.HactlQuiet(t, "operator", "remove", "-f", spec, "--yes") })

	for _, tc := range []struct {
		spec string
		args []string
		want string
	}{
		{base, []string{"--auto-replace"}, "spec.etcd.spares"},
		{spec, []string{"--auto-replace", "--grace-period", "2s"}, "--grace-period"},
		{spec, []string{"--ssh-key", "/nonexistent"}, "--ssh-key"},
		{spec, []string{"--auto-replace", "--ssh-key", "/nonexistent"}, "--ssh-key"},
	} {
		r := suite.Hactl(t, append([]string{"operator", "deploy", "-f", tc.spec, "--image-archive", archive, "--no-backups"}, tc.args...)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("operator deploy %v: exit %d, want 2 naming %q:\n%s", tc.args, r.Code, tc.want, r.Stderr)
		}
	}
	suite.MustHactl(t, "operator", "deploy", "-f", spec, "--image-archive", archive, "--no-backups", "--auto-replace", "--grace-period", "20s",
		"--requeue-period", "5s")
	ec := waitEtcdCluster(t, name, "Running with spare-c in the pool", 90*time.Second, func(ec hactlv1.EtcdCluster) bool {
		h := ec.Spec.Healing
		st, _, _ := condition(ec, hactlv1.ConditionHealing)
		return ec.Status.Phase == hactlv1.PhaseRunning && h != nil && h.AutoReplace && len(h.Spares) == 1 && len(h.Spares[0].HostKeys) > 0 && st == "False"
	})
	if ec.Spec.Healing.Spares[0].Zone != "az-c" || ec.Spec.Members[2].Zone != "az-c" {
		t.Errorf("zones not carried into the EtcdCluster: %+v / %+v", ec.Spec.Healing.Spares, ec.Spec.Members)
	}

	// cp-c's etcd stopped for less than the grace period: no heal, the member is kept.
	suite.ExecOn(t, "cp-c", "systemctl", "stop", "etcd.service")
	waitEtcdCluster(t, name, "waiting out the grace period of cp-c's stopped etcd", 90*time.Second, func(ec hactlv1.EtcdCluster) bool {
		_, reason, _ := condition(ec, hactlv1.ConditionHealing)
		return reason == observe.ReasonGracePeriod
	})
	suite.ExecOn(t, "cp-c", "systemctl", "start", "etcd.service")
	back := waitEtcdCluster(t, name, "cp-c back within the grace period, no heal", 90*time.Second, func(ec hactlv1.EtcdCluster) bool {
		_, reason, _ := condition(ec, hactlv1.ConditionHealing)
		return ec.Status.Phase == hactlv1.PhaseRunning && (reason == observe.ReasonMemberRecovered || reason == observe.ReasonAllMembersServe)
	})
	if back.Status.Healing != nil || len(back.Status.Heals) != 0 || len(back.Spec.Healing.Spares) != 1 {
		t.Fatalf("a member back within the grace period was healed: healing %+v, heals %+v", back.Status.Healing, back.Status.Heals)
	}

	w := suite.StartWriter(t, "heal", c)
	// The writer's acknowledged writes flow before the host goes (100: two seconds' worth at its
	// 50/s), so its record spans the kill.
	harness.WaitFor(t, "the writer's first 100 writes committed", 30*time.Second, 200*time.Millisecond, func() string {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := w.Client.Get(wctx, "/hactl-e2e/heal/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err.Error()
		}
		if resp.Count < 100 {
			return fmt.Sprintf("%d keys under /hactl-e2e/heal/", resp.Count)
		}
		return ""
	})
	killed := time.Now()
	h, err := suite.Lab.Host("cp-c")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("$ docker kill %s   # cp-c's host is gone", h.Container)
	if out, err := exec.CommandContext(ctx, "docker", "kill", h.Container).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v: %s", err, out)
	}
	waitEtcdCluster(t, name, "waiting out cp-c's grace period", time.Minute, func(ec hactlv1.EtcdCluster) bool {
		_, reason, _ := condition(ec, hactlv1.ConditionHealing)
		return reason == observe.ReasonGracePeriod || ec.Status.Healing != nil || len(ec.Status.Heals) > 0
	})
	// The operator's leader killed in the middle of the heal (cp-c's member removed, the learner
	// not yet promoted: etcd refuses the add for a few seconds after a removal, so the heal waits
	// there): the new leader continues from the recorded step instead of starting over.
	var started metav1.Time
	mid := waitEtcdCluster(t, name, "in the middle of the heal", 2*time.Minute, func(ec hactlv1.EtcdCluster) bool {
		h := ec.Status.Healing
		return len(ec.Status.Heals) > 0 || h != nil && (h.Step == hactlv1.HealAddingLearner || h.Step == hactlv1.HealStartingMember || h.Step == hactlv1.HealPromoting)
	})
	if h := mid.Status.Healing; h != nil {
		started = h.StartedAt
		holder := leaseHolder(t)
		pod, _, _ := strings.Cut(holder, "_")
		t.Logf("heal at step %s (attempt %d): killing the operator's leader %s", h.Step, h.Attempts+1, pod)
		kubectl(t, "delete", "pod", "-n", deploy.DefaultNamespace, pod, "--grace-period=0", "--force", "--wait=false")
	} else {
		t.Log("the heal finished before its middle was seen: the leader change mid-heal was not exercised this run")
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, err := suite.Lab.Exec(context.Background(), "spare-c", "journalctl", "-u", "etcd.service", "--no-pager", "-n", "60")
			t.Logf("spare-c's etcd journal (err %v):\n%s", err, out)
		}
	})
	ec = waitEtcdCluster(t, name, "healed onto spare-c", 4*time.Minute, func(ec hactlv1.EtcdCluster) bool {
		if ec.Status.Healing != nil {
			return false
		}
		return len(ec.Status.Heals) > 0
	})
	healedIn := time.Since(killed)
	rec := ec.Status.Heals[len(ec.Status.Heals)-1]
	if rec.Result != hactlv1.HealSucceeded || rec.Member != "cp-c" || rec.Spare != "spare-c" || rec.NewMemberID == "" {
		t.Fatalf("heal record %+v", rec)
	}
	t.Logf("healed %s after the kill (grace period 20s): %s", healedIn.Round(100*time.Millisecond), rec.Message)
	if !started.IsZero() && (!rec.StartedAt.Equal(&started) || len(ec.Status.Heals) != 1) {
		t.Errorf("the heal was started over after the leader change: started %s, recorded %s, %d records", started, rec.StartedAt, len(ec.Status.Heals))
	}
	if !strings.Contains(rec.Message, "move spare-c into the etcd hosts of cluster.yaml") {
		t.Errorf("the record does not say what to change in cluster.yaml: %s", rec.Message)
	}
	var members []string
	for _, m := range ec.Spec.Members {
		members = append(members, m.Name)
	}
	if !slices.Equal(members, []string{"cp-a", "cp-b", "spare-c"}) || len(ec.Spec.Healing.Spares) != 0 {
		t.Errorf("EtcdCluster spec after the heal: members %v, spares %+v", members, ec.Spec.Healing.Spares)
	}
	// etcd: three healthy voting members, spare-c among them.
	cli := w.Client
	var ml []string
	harness.WaitFor(t, "three healthy voting members", time.Minute, time.Second, func() string {
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := cli.MemberList(mctx)
		if err != nil {
			return err.Error()
		}
		ml = ml[:0]
		for _, m := range resp.Members {
			if m.IsLearner {
				return m.Name + " is a learner"
			}
			ml = append(ml, m.Name)
		}
		slices.Sort(ml)
		if !slices.Equal(ml, []string{"cp-a", "cp-b", "spare-c"}) {
			return fmt.Sprintf("members %v", ml)
		}
		if _, err := cli.Status(mctx, suite.Endpoint(t, "spare-c")); err != nil {
			return "spare-c: " + err.Error()
		}
		return ""
	})
	w.Verify("across the heal")
	ec = waitEtcdCluster(t, name, "Running on the healed members", time.Minute, func(ec hactlv1.EtcdCluster) bool {
		healthy := 0
		for _, m := range ec.Status.Members {
			if m.Healthy {
				healthy++
			}
		}
		_, reason, _ := condition(ec, hactlv1.ConditionHealing)
		return ec.Status.Phase == hactlv1.PhaseRunning && healthy == 3 && reason == observe.ReasonHealSucceeded
	})
	events := kubectl(t, "get", "events", "-n", deploy.DefaultNamespace, "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	if !strings.Contains(events, observe.ReasonHealSucceeded) {
		t.Errorf("no HealSucceeded event: %s", events)
	}
	if unit := suite.ExecOn(t, "spare-c", "systemctl", "is-active", "etcd.service"); strings.TrimSpace(unit) != "active" {
		t.Errorf("etcd on spare-c: %s", unit)
	}
	// hactl knows what happened: status names the drift of cluster.yaml (and exits 3: cp-c, still
	// an etcd host of the spec, is gone).
	r := suite.Hactl(t, "status", "-f", spec, "-o", "json")
	var rep status.Report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, r.Stdout)
	}
	if r.Code != 3 || rep.Operator == nil || len(rep.Operator.Drift) != 1 || !strings.Contains(rep.Operator.Drift[0], "cp-c was replaced by spare-c") {
		t.Errorf("status after the heal: exit %d, operator %+v", r.Code, rep.Operator)
	}

	// plan (and bootstrap) on the spec as it was: refused with the same words, nothing undone.
	if r := suite.Hactl(t, "plan", "-f", spec); r.Code != 1 || !strings.Contains(r.Stderr, "cp-c was replaced by spare-c") || !strings.Contains(r.Stderr, "hactl changes nothing") {
		t.Errorf("plan after the heal: exit %d, want 1 naming the drift:\n%s", r.Code, r.Stderr)
	}

	// operator adopt records the new member in hactl's state dir (once), and with cluster.yaml
	// edited as it says, status reports no drift.
	suite.MustHactl(t, "operator", "adopt", "-f", spec, "--dry-run")
	if st, err := state.Load(c.Spec.StateDir); err != nil || st.Members["cp-c"] == nil || st.Members["spare-c"] != nil {
		t.Fatalf("a dry run changed the state dir: %v %+v", err, st)
	}
	out := suite.MustHactl(t, "operator", "adopt", "-f", spec).Stdout
	st, err := state.Load(c.Spec.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Members["spare-c"]; m == nil || m.ID != rec.NewMemberID || m.InitialClusterState != "existing" || st.Members["cp-c"] != nil {
		t.Errorf("state after adopt: %+v\n%s", st.Members, out)
	}
	if out := suite.MustHactl(t, "operator", "adopt", "-f", spec).Stdout; !strings.Contains(out, "nothing to adopt") {
		t.Errorf("a second adopt: %s", out)
	}
	edited := labSpec(t)
	for i := range edited.Spec.Hosts {
		if edited.Spec.Hosts[i].Name == "cp-c" {
			edited.Spec.Hosts[i].Roles = []v1alpha1.Role{v1alpha1.RoleControlPlane}
		}
	}
	edited.Spec.Hosts = append(edited.Spec.Hosts, v1alpha1.Host{Name: sp.Name, Address: sp.Address, Zone: sp.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	healed := harness.WriteSpecIn(t, suite.Lab.Dir(), edited, "cluster-healed.yaml")
	r = suite.Hactl(t, "status", "-f", healed, "-o", "json")
	rep = status.Report{}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, r.Stdout)
	}
	if rep.Operator == nil || len(rep.Operator.Drift) != 0 {
		t.Errorf("drift with cluster.yaml edited as told: %+v", rep.Operator)
	}
	removeAfterHeal(t, spec, healed)
}
