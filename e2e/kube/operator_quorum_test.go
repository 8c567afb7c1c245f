//go:build e2e

package kubee2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/kubeadm/images"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/status"
)

// quorumNamespace is where the quorum-lost phase deploys its own operator, next to the lab's.
const quorumNamespace = "hactl-quorum"

// testOperatorQuorumLost is TestKube's quorum-lost phase: it proves the operator's quorum-lost case on a real etcd cluster: one that
// does not back the Kubernetes cluster the operator runs in (with the lab's own etcd, a lost quorum
// takes the API server down, and with it every condition and event the operator could write). hactl
// builds a second etcd cluster, lab-quorum, on the workers w-a/b/c (an etcd-only cluster.yaml, as a
// user managing an etcd for another system writes it), and `hactl operator deploy --kubeconfig
// --namespace hactl-quorum --auto-replace --grace-period 20s` puts an operator for it into the lab's
// Kubernetes cluster, with spare-c as its spare. etcd stopped on w-a and w-b: the EtcdCluster's
// Healing condition says QuorumLost with the restore command, QuorumAtRisk is True for the same
// reason, events say so, the operator's metrics carry the series the alerts fire on; past the grace
// period nothing destructive happened (no heal started, spare-c untouched, the member list of etcd
// unchanged). Started again: Running, no heal; status of the etcd-only spec shows the operator's
// section, read where operator deploy recorded it (the kubeconfig and namespace in the state dir);
// operator remove drops that record. It runs before the heal phase (TestKube's order), which needs
// spare-c unused, and after the operator phase, which imports the operator's image on every node.
func testOperatorQuorumLost(t *testing.T) {
	c := labSpec(t) // a fresh copy, changed into an etcd-only spec
	c.Metadata.Name = "lab-quorum"
	c.Spec.StateDir = filepath.Join(suite.Lab.Dir(), "state-quorum")
	c.Spec.Kubernetes, c.Spec.Scheduler, c.Spec.Backup = nil, nil, nil
	lab.WithoutLoadBalancer(c)
	c.Spec.Hosts = nil
	for _, name := range lab.WorkerHosts {
		h, err := suite.Lab.Host(name)
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: h.Name, Address: h.Address, Zone: h.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	}
	sp, err := suite.Lab.Host(lab.SpareHosts[0])
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Etcd.Spares = []v1alpha1.Spare{{Name: sp.Name, Address: sp.Address, Zone: sp.Zone}}
	spec := harness.WriteSpecIn(t, suite.Lab.Dir(), c, "cluster-quorum.yaml")
	refs, err := images.ArchiveImages(operatorArchive(t))
	if err != nil {
		t.Fatal(err)
	}
	suite.BootstrapJSON(t, suite.Lab.SpecPath(3)) // the Kubernetes cluster (a re-run: no change)
	for _, n := range suite.Lab.KubeNodes() {
		if out := suite.ExecOn(t, n.Name, "ctr", "-n", "k8s.io", "images", "ls", "-q", "name=="+refs[0]); strings.TrimSpace(out) == "" {
			t.Fatalf("%s has no image %s: the operator phase imports it over SSH (run TestKube/operator before)", n.Name, refs[0])
		}
	}
	suite.BootstrapJSON(t, spec)
	kubeconfig := suite.Lab.Kubeconfig()
	suite.MustHactl(t, "kubeconfig", "-f", suite.Lab.SpecPath(3), "--out", kubeconfig)
	t.Cleanup(func() {
		suite.HactlQuiet(t, "operator", "remove", "-f", spec, "--kubeconfig", kubeconfig, "--namespace", quorumNamespace, "--yes")
		suite.Lab.Kubectl(context.Background(), "delete", "namespace", quorumNamespace, "--wait=false")
		for _, h := range lab.WorkerHosts { // the second cluster's etcd off the workers again
			suite.Lab.Exec(context.Background(), h, "systemctl", "disable", "--now", "etcd.service")
		}
	})

	// The image is on every node already (the operator phase imported it over SSH); through a kubeconfig
	// hactl is given the reference, as a user who loaded it into the cluster does.
	suite.MustHactl(t, "operator", "deploy", "-f", spec, "--kubeconfig", kubeconfig, "--namespace", quorumNamespace,
		"--image", refs[0], "--replicas", "1", "--auto-replace", "--grace-period", "20s", "--requeue-period", "5s")
	name := c.Metadata.Name
	before := waitEtcdClusterIn(t, quorumNamespace, name, "Running with spare-c in the pool", 90*time.Second, func(ec hactlv1.EtcdCluster) bool {
		h := ec.Spec.Healing
		st, _, _ := condition(ec, hactlv1.ConditionHealing)
		return ec.Status.Phase == hactlv1.PhaseRunning && h != nil && h.AutoReplace && len(h.Spares) == 1 && st == "False"
	})

	for _, h := range []string{"w-a", "w-b"} {
		suite.ExecOn(t, h, "systemctl", "stop", "etcd.service")
	}
	stopped := time.Now()
	lost := waitEtcdClusterIn(t, quorumNamespace, name, "reporting the lost quorum", 2*time.Minute, func(ec hactlv1.EtcdCluster) bool {
		_, reason, _ := condition(ec, hactlv1.ConditionHealing)
		return reason == observe.ReasonHealQuorumLost
	})
	st, reason, msg := condition(lost, hactlv1.ConditionAvailable)
	if st != "False" {
		t.Errorf("Available: %s %s: %s; want False", st, reason, msg)
	}
	if st, reason, msg := condition(lost, hactlv1.ConditionQuorumAtRisk); st != "True" || reason != observe.ReasonQuorumLost {
		t.Errorf("QuorumAtRisk: %s %s: %s; want True QuorumLost", st, reason, msg)
	}
	if _, _, msg := condition(lost, hactlv1.ConditionHealing); !strings.Contains(msg, "changes nothing") || !strings.Contains(msg, "hactl restore -f cluster.yaml --from latest") {
		t.Errorf("the Healing condition does not give the restore command: %s", msg)
	}

	// Past the grace period, three looks more of the operator (its etcdcluster controller's
	// reconciles, one every --requeue-period 5s, counted on the Lease holder's metrics endpoint
	// through the API server's pod proxy): still nothing destructive.
	pod, _, _ := strings.Cut(leaseHolderIn(t, quorumNamespace), "_")
	metricsPath := "/api/v1/namespaces/" + quorumNamespace + "/pods/" + pod + ":8080/proxy/metrics"
	graceEnd := stopped.Add(20 * time.Second)
	base := -1.0
	harness.WaitFor(t, "three looks of the operator past the grace period", 2*time.Minute, time.Second, func() string {
		if time.Now().Before(graceEnd) {
			return "within the grace period"
		}
		n := counterSum(t, kubectl(t, "get", "--raw", metricsPath), "controller_runtime_reconcile_total", map[string]string{"controller": "etcdcluster"})
		if base < 0 {
			base = n // a look in progress now may have started within the grace period: one more than 3
		}
		if n < base+4 {
			return fmt.Sprintf("%.0f looks finished since the grace period ended", n-base)
		}
		return ""
	})
	t.Logf("three looks of the operator past the grace period, %s after etcd stopped on w-a and w-b", time.Since(stopped).Round(time.Second))
	after := etcdClusterIn(t, quorumNamespace, name)
	if _, reason, _ := condition(after, hactlv1.ConditionHealing); reason != observe.ReasonHealQuorumLost {
		t.Errorf("Healing reason past the grace period: %s, want %s", reason, observe.ReasonHealQuorumLost)
	}
	if after.Status.Healing != nil || len(after.Status.Heals) != 0 || len(after.Spec.Healing.Spares) != 1 ||
		!slices.EqualFunc(after.Spec.Members, before.Spec.Members, func(a, b hactlv1.MemberEndpoint) bool { return a.Name == b.Name }) {
		t.Errorf("the operator acted without a quorum: healing %+v, heals %+v, spares %+v, members %+v",
			after.Status.Healing, after.Status.Heals, after.Spec.Healing.Spares, after.Spec.Members)
	}
	// spare-c: no etcd unit was installed (the heal's first step on a spare).
	if out := suite.ExecOn(t, "spare-c", "sh", "-c", "systemctl list-unit-files --no-legend etcd.service || true"); strings.TrimSpace(out) != "" {
		t.Errorf("spare-c was touched: %s", out)
	}
	events := kubectl(t, "get", "events", "-n", quorumNamespace, "-o", "jsonpath={range .items[*]}{.reason}{\"\\t\"}{.note}{.message}{\"\\n\"}{end}")
	if !strings.Contains(events, observe.ReasonHealQuorumLost+"\t") || !strings.Contains(events, "hactl restore") {
		t.Errorf("no QuorumLost event with the restore command:\n%s", events)
	}
	// The series the alerts (HactlEtcdQuorumAtRisk, HactlEtcdNoLeader) fire on, read from the
	// Lease holder's metrics endpoint through the API server's pod proxy.
	metrics := kubectl(t, "get", "--raw", metricsPath)
	cluster := quorumNamespace + "/" + name
	if !hasSeries(t, metrics, "hactl_operator_condition", 1, map[string]string{"cluster": cluster, "type": hactlv1.ConditionQuorumAtRisk, "reason": observe.ReasonQuorumLost}) ||
		!hasSeries(t, metrics, "hactl_operator_etcd_has_leader", 0, map[string]string{"cluster": cluster}) {
		t.Errorf("the operator's metrics lack the quorum-lost series:\n%s", grepLines(metrics, "hactl_operator_"))
	}

	for _, h := range []string{"w-a", "w-b"} {
		suite.ExecOn(t, h, "systemctl", "start", "etcd.service")
	}
	back := waitEtcdClusterIn(t, quorumNamespace, name, "Running again, no heal", 2*time.Minute, func(ec hactlv1.EtcdCluster) bool {
		_, reason, _ := condition(ec, hactlv1.ConditionHealing)
		return ec.Status.Phase == hactlv1.PhaseRunning && (reason == observe.ReasonMemberRecovered || reason == observe.ReasonAllMembersServe)
	})
	if back.Status.Healing != nil || len(back.Status.Heals) != 0 {
		t.Errorf("healed after the quorum came back: %+v %+v", back.Status.Healing, back.Status.Heals)
	}
	// hactl knows where this operator runs: operator deploy recorded its kubeconfig and namespace in
	// the state dir, so status (an etcd-only spec: no SSH to any API) shows its section from there.
	r := suite.MustHactl(t, "status", "-f", spec, "-o", "json")
	var rep status.Report
	harness.DecodeJSON(t, r, &rep)
	if rep.Operator == nil || rep.Operator.Namespace != quorumNamespace || rep.Operator.Phase != hactlv1.PhaseRunning || rep.Operator.Error != "" {
		t.Errorf("status of lab-quorum: operator section %+v, want %s's, Running", rep.Operator, quorumNamespace)
	}
	if st, err := state.Load(c.Spec.StateDir); err != nil || st.Operator == nil || st.Operator.Namespace != quorumNamespace || st.Operator.Kubeconfig != kubeconfig {
		t.Errorf("the state dir's record of the operator: %+v (%v)", st, err)
	}
	suite.MustHactl(t, "operator", "remove", "-f", spec, "--kubeconfig", kubeconfig, "--namespace", quorumNamespace, "--yes")
	if st, err := state.Load(c.Spec.StateDir); err != nil || st.Operator != nil {
		t.Errorf("operator remove left the record: %+v (%v)", st.Operator, err)
	}
	deleteNamespaceFinishes(t, quorumNamespace)
}

// hasSeries reports whether the Prometheus text exposition holds a sample of the gauge metric
// with all of labels and the value want. An exposition that does not parse fails the test.
func hasSeries(t *testing.T, exposition, metric string, want float64, labels map[string]string) bool {
	t.Helper()
	return slices.ContainsFunc(samples(t, exposition, metric, labels), func(m *dto.Metric) bool { return m.GetGauge().GetValue() == want })
}

// counterSum is the sum of the counter metric's samples carrying all of labels in the Prometheus
// text exposition. An exposition that does not parse, or holds no such sample, fails the test.
func counterSum(t *testing.T, exposition, metric string, labels map[string]string) float64 {
	t.Helper()
	ms := samples(t, exposition, metric, labels)
	if len(ms) == 0 {
		t.Fatalf("the operator's metrics have no %s with labels %v:\n%s", metric, labels, grepLines(exposition, metric))
	}
	sum := 0.0
	for _, m := range ms {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// samples returns the samples of metric in the Prometheus text exposition that carry all of
// labels. An exposition that does not parse fails the test.
func samples(t *testing.T, exposition, metric string, labels map[string]string) []*dto.Metric {
	t.Helper()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(exposition))
	if err != nil {
		t.Fatalf("the operator's metrics: %v", err)
	}
	var out []*dto.Metric
	for _, m := range fams[metric].GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}

// grepLines returns the lines of s starting with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
