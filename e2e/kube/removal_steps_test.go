//go:build e2e

package kubee2e

// Steps of issue 37's item 4 ("removal leaves nothing stuck"): after each removal, what a user does
// next — deletes what is left, runs the command again — and sees it finish. The ordered tests call
// them right after the removal they follow (see each function).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/operator/deploy"
)

// schedulerLease is the lab's hactl-scheduler Lease (the spec's default leaderElection).
const schedulerLeaseNS, schedulerLease = "kube-system", "hactl-scheduler"

// afterOperatorRemove follows `hactl operator remove` without --purge (zz_operator_test.go, right
// after it checks that the EtcdSnapshots stay, before the --purge step): no EtcdSnapshot left in the
// namespace carries the finalizer only the removed operator would clear, and deleting one — what a
// user does next — finishes (it hung forever before) and leaves its snapshot in the bucket. keep
// names the EtcdSnapshots the later steps still need (not deleted); with no other one left only
// the finalizers are checked.
func afterOperatorRemove(t *testing.T, namespace string, inBucket func(stem string) bool, keep ...string) {
	t.Helper()
	out := kubectl(t, "get", "etcdsnapshots", "-n", namespace, "-o",
		`jsonpath={range .items[*]}{.metadata.name}{" "}{.spec.key}{" "}{.metadata.finalizers}{"\n"}{end}`)
	victim, key, seen := "", "", 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		seen++
		if strings.Contains(line, deploy.SnapshotFinalizer) {
			t.Errorf("EtcdSnapshot %s/%s still carries %s after operator remove: %s", namespace, f[0], deploy.SnapshotFinalizer, line)
		}
		if victim == "" && len(f) >= 2 && !slices.Contains(keep, f[0]) {
			victim, key = f[0], f[1]
		}
	}
	if seen == 0 {
		t.Fatalf("no EtcdSnapshot left in %s after operator remove: nothing to check (remove keeps them)", namespace)
	}
	if victim == "" {
		t.Logf("no EtcdSnapshot besides %v to delete: finalizers checked only", keep)
		return
	}
	start := time.Now()
	kubectl(t, "delete", "etcdsnapshot", "-n", namespace, victim, "--timeout", "60s")
	t.Logf("EtcdSnapshot %s deleted %s after operator remove", victim, time.Since(start).Round(100*time.Millisecond))
	if !inBucket(key) {
		t.Errorf("deleting EtcdSnapshot %s without the operator deleted %s from the bucket", victim, key)
	}
}

// deleteNamespaceFinishes deletes namespace and waits (kubectl's own wait, up to 2 minutes) until
// it is gone: what a user does after `hactl operator remove`. Call it after `operator remove
// --purge` (zz_operator_test.go, last, after the CRDs are checked gone; a later deploy applies the
// namespace again) and after the quorum test's `operator remove --namespace hactl-quorum`
// (zzy_quorum_test.go, after the state-dir check at its end, with quorumNamespace). Before, a
// namespace holding an EtcdSnapshot stayed Terminating forever.
func deleteNamespaceFinishes(t *testing.T, namespace string) {
	t.Helper()
	start := time.Now()
	if out, err := suite.Lab.Kubectl(context.Background(), "delete", "namespace", namespace, "--ignore-not-found", "--timeout", "2m"); err != nil {
		left, _ := suite.Lab.Kubectl(context.Background(), "api-resources", "--verbs=list", "--namespaced", "-o", "name")
		t.Fatalf("namespace %s not deleted within 2m after operator remove: %v\n%s\n(namespaced kinds: %s)", namespace, err, out, strings.Join(strings.Fields(left), " "))
	}
	if out := kubectl(t, "get", "namespace", namespace, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("namespace %s still there: %s", namespace, out)
	}
	t.Logf("namespace %s deleted in %s", namespace, time.Since(start).Round(100*time.Millisecond))
}

// leaseStaysGone checks, for a while (every second for 10 s: five of a scheduler's 2 s retry
// periods), that the scheduler's Lease is absent: no replica left running renews or creates it.
func leaseStaysGone(t *testing.T) {
	t.Helper()
	for i := 0; i < 10; i++ {
		out, err := suite.Lab.Kubectl(context.Background(), "get", "lease", "-n", schedulerLeaseNS, schedulerLease, "--ignore-not-found",
			"-o", "jsonpath={.spec.holderIdentity}")
		if err != nil {
			t.Fatalf("get lease: %v\n%s", err, out)
		}
		if h := strings.TrimSpace(out); h != "" {
			t.Fatalf("Lease %s/%s held by %q %ds after scheduler remove: a removed replica renews it", schedulerLeaseNS, schedulerLease, h, i)
		}
		time.Sleep(time.Second)
	}
}

// afterStaticSchedulerRemove follows the static pods' `hactl scheduler remove -f spec --yes`
// (scheduler_test.go, step "Deployment mode through a kubeconfig…", right after that remove; the
// wait for "the static pods gone" after it is then no longer needed): the remove itself waited
// until kubelet stopped every static pod, so none is left at once, the Lease is gone and stays
// gone, the RBAC is gone; running the command again finishes and finds nothing deployed.
func afterStaticSchedulerRemove(t *testing.T, spec string) {
	t.Helper()
	if out := kubectl(t, "get", "pods", "-n", "kube-system", "-l", "app.kubernetes.io/name=hactl-scheduler", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("static pods still there when scheduler remove returned: %s", out)
	}
	leaseStaysGone(t)
	if out := kubectl(t, "get", "clusterrolebindings,rolebindings,roles", "-A", "-l", "app.kubernetes.io/name=hactl-scheduler", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("RBAC left after scheduler remove: %s", out)
	}
	r := suite.MustHactl(t, "scheduler", "remove", "-f", spec, "--yes")
	if n := strings.Count(r.Stderr, "nothing deployed here"); n == 0 {
		t.Errorf("second scheduler remove: no host says nothing is deployed:\n%s", r.Stderr)
	}
}

// afterSchedulerRemoveThroughAPI follows `hactl scheduler remove -f spec --kubeconfig kc --yes`
// (scheduler_test.go, end of step "Deployment mode through a kubeconfig…", after its check of the
// objects left): the Lease is gone and stays gone, no pod of the scheduler is left, and the command
// run again finishes.
func afterSchedulerRemoveThroughAPI(t *testing.T, spec, kc string) {
	t.Helper()
	leaseStaysGone(t)
	if out := kubectl(t, "get", "pods,clusterrolebindings", "-A", "-l", "app.kubernetes.io/name=hactl-scheduler", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("left after scheduler remove: %s", out)
	}
	suite.MustHactl(t, "scheduler", "remove", "-f", spec, "--kubeconfig", kc, "--yes")
}

// afterReset follows `hactl reset -f spec --hosts host --yes` (kube_test.go, step "a reset worker
// leaves the cluster…", right after its check of w-c's files, with "w-c", before the bootstrap
// without w-c): kube-proxy's and kubelet's chains and the pod network's (CNI-*, hactl-bridge's
// rules) are gone from both families (only they would clear them), and the reset run again — what a
// user does when unsure it finished — finishes.
func afterReset(t *testing.T, spec, host string) {
	t.Helper()
	// iptables-save must run (else nothing is checked); the grep's lines are what is left.
	out, err := suite.Lab.Exec(context.Background(), host, "sh", "-c",
		`dump=$(iptables-save) || exit 1; { echo "$dump"; ip6tables-save 2>/dev/null || true; } | grep -e '^:KUBE-' -e ' -[jg] KUBE-' -e '^:CNI-' -e 'hactl-bridge' || true`)
	if err != nil {
		t.Fatalf("%s: iptables-save: %v\n%s", host, err, out)
	}
	if s := strings.TrimSpace(out); s != "" {
		t.Errorf("%s after reset: kube-proxy's or the pod network's chains left (no other CNI network on the lab's hosts):\n%s", host, s)
	}
	r := suite.MustHactl(t, "reset", "-f", spec, "--hosts", host, "--yes")
	if !strings.Contains(r.Stdout, fmt.Sprintf("drain Node %s", host)) {
		t.Errorf("second reset: no plan shown:\n%s", r.Stdout)
	}
}

// removeAfterHeal replaces the heal test's removal (zzz_heal_test.go: call it at the end of the
// test, after the drift check with cluster-healed.yaml, with spec and that file; its t.Cleanup
// removal on the old spec then only covers a failure before): operator remove on the spec that
// still names cp-c is refused with the drift (the EtcdCluster is the only record of the heal, the
// one bootstrap checks) and removes nothing; on the spec edited as told it finishes, and the
// namespace then deletes.
func removeAfterHeal(t *testing.T, staleSpec, editedSpec string) {
	t.Helper()
	r := suite.Hactl(t, "operator", "remove", "-f", staleSpec, "--yes")
	if r.Code != 1 || !strings.Contains(r.Stderr, "cp-c was replaced by spare-c") || !strings.Contains(r.Stderr, "hactl changes nothing") {
		t.Errorf("operator remove on the spec without the heal: exit %d, want 1 naming the drift:\n%s", r.Code, r.Stderr)
	}
	if out := kubectl(t, "get", "deployment", "-n", deploy.DefaultNamespace, deploy.Name, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) == "" {
		t.Errorf("the refused remove deleted the Deployment")
	}
	suite.MustHactl(t, "operator", "remove", "-f", editedSpec, "--yes")
	deleteNamespaceFinishes(t, deploy.DefaultNamespace)
}
