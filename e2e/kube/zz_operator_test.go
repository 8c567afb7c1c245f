//go:build e2e

package kubee2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/deploy"
)

// operatorArchive is the image `make operator-image` built (bin/ next to the hactl under test).
func operatorArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(suite.Bin), "hactl-operator-image.tar")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: make e2e builds it (make operator-image)", err)
	}
	return p
}

// etcdCluster reads the lab's EtcdCluster through the VIP.
func etcdCluster(t *testing.T, name string) v1.EtcdCluster {
	t.Helper()
	var ec v1.EtcdCluster
	if err := json.Unmarshal([]byte(kubectl(t, "get", "etcdcluster", "-n", deploy.DefaultNamespace, name, "-o", "json")), &ec); err != nil {
		t.Fatal(err)
	}
	return ec
}

// waitEtcdCluster polls the EtcdCluster (the operator requeues every 30 s ± 10%) until ok.
func waitEtcdCluster(t *testing.T, name, what string, within time.Duration, ok func(v1.EtcdCluster) bool) v1.EtcdCluster {
	t.Helper()
	deadline := time.Now().Add(within)
	start := time.Now()
	for {
		ec := etcdCluster(t, name)
		if ok(ec) {
			t.Logf("EtcdCluster %s: %s after %s", name, what, time.Since(start).Round(100*time.Millisecond))
			return ec
		}
		if time.Now().After(deadline) {
			t.Fatalf("EtcdCluster %s: not %s within %s; phase %s, conditions %+v", name, what, within, ec.Status.Phase, ec.Status.Conditions)
		}
		time.Sleep(time.Second)
	}
}

func condition(ec v1.EtcdCluster, typ string) (status, reason, msg string) {
	for _, c := range ec.Status.Conditions {
		if c.Type == typ {
			return string(c.Status), c.Reason, c.Message
		}
	}
	return "", "", ""
}

func leaseHolder(t *testing.T) string {
	t.Helper()
	out, err := suite.Lab.Kubectl(context.Background(), "get", "lease", "-n", deploy.DefaultNamespace, deploy.Name, "-o", "jsonpath={.spec.holderIdentity}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// TestOperator runs last in this package (its file sorts after scheduler_test.go, and go test runs
// tests in file order): it stops the etcd member of cp-c, a control plane, and with that in the
// history the scheduler tests' later static-pod restarts did not all come back Ready within their 3
// minutes (seen twice: one replica of a new configuration; not yet understood: likely kubelet's
// restart back-off on that host).
//
// TestOperator: hactl operator deploy on the lab's cluster (image imported over SSH): bad flags
// and a dry run change nothing; the EtcdCluster becomes Running with every member seen; etcd
// stopped on cp-c makes it Degraded with QuorumAtRisk, started again Running, with events; the
// Lease holder's pod deleted: another replica takes the Lease and the Deployment is whole again; a
// bad EtcdCluster is refused by the API server naming the field; remove deletes the operator and
// leaves the CRDs.
func TestOperator(t *testing.T) {
	ctx := context.Background()
	spec := suite.Lab.SpecPath(3)
	suite.BootstrapJSON(t, spec)
	suite.MustHactl(t, "kubeconfig", "-f", spec, "--out", suite.Lab.Kubeconfig())
	name := labSpec(t).Metadata.Name
	archive := operatorArchive(t)
	t.Cleanup(func() {
		suite.ExecOn(t, "cp-c", "systemctl", "start", "etcd.service")
		suite.HactlQuiet(t, "operator", "remove", "-f", spec, "--yes")
	})

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-archive", archive, "--kubeconfig", suite.Lab.Kubeconfig()}, "--image-archive"},
		{[]string{"--image-archive", archive, "--replicas", "9"}, "--replicas"},
		{[]string{"--image-archive", archive, "--namespace", "Bad_NS"}, "--namespace"},
		{[]string{"--image-archive", archive, "--image", "ghcr.io/hactl/other:1"}, "is not in --image-archive"},
		{[]string{}, "--image"},
	} {
		r := suite.Hactl(t, append([]string{"operator", "deploy", "-f", spec}, tc.args...)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("operator deploy %v: exit %d, want 2 naming %q", tc.args, r.Code, tc.want)
		}
	}
	r := suite.MustHactl(t, "operator", "deploy", "-f", spec, "--image-archive", archive, "--dry-run")
	for _, want := range []string{"kind: CustomResourceDefinition", "kind: EtcdCluster", "kind: Deployment", "<redacted:"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("dry run lacks %q", want)
		}
	}
	if strings.Contains(r.Stdout, "PRIVATE KEY") {
		t.Error("the dry run prints a private key")
	}
	if out, _ := suite.Lab.Kubectl(ctx, "get", "crd", "etcdclusters.hactl.io", "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Error("the dry run (or an earlier run) left the CRD in the cluster")
	}

	start := time.Now()
	var ready deploy.Ready
	r = suite.MustHactl(t, "operator", "deploy", "-f", spec, "--image-archive", archive, "-o", "json")
	if err := json.Unmarshal([]byte(r.Stdout), &ready); err != nil {
		t.Fatal(err)
	}
	t.Logf("operator deploy: %s", time.Since(start).Round(100*time.Millisecond))
	if ready.AvailableReplicas < 1 || ready.Phase == v1.PhasePending {
		t.Fatalf("deploy: %+v", ready)
	}
	ec := waitEtcdCluster(t, name, "Running with every member healthy", 90*time.Second, func(ec v1.EtcdCluster) bool {
		healthy := 0
		for _, m := range ec.Status.Members {
			if m.Healthy && m.ID != "" {
				healthy++
			}
		}
		st, _, _ := condition(ec, v1.ConditionAvailable)
		return ec.Status.Phase == v1.PhaseRunning && healthy == 3 && ec.Status.Leader != "" && st == "True"
	})
	t.Logf("leader %s, conditions %+v", ec.Status.Leader, ec.Status.Conditions)

	// A member down: Degraded, one failure from quorum loss.
	suite.ExecOn(t, "cp-c", "systemctl", "stop", "etcd.service")
	ec = waitEtcdCluster(t, name, "Degraded with QuorumAtRisk", 90*time.Second, func(ec v1.EtcdCluster) bool {
		st, reason, _ := condition(ec, v1.ConditionQuorumAtRisk)
		return ec.Status.Phase == v1.PhaseDegraded && st == "True" && reason == "OneFailureFromQuorumLoss"
	})
	if _, _, msg := condition(ec, v1.ConditionDegraded); !strings.Contains(msg, "cp-c") {
		t.Errorf("Degraded does not name cp-c: %q", msg)
	}
	suite.ExecOn(t, "cp-c", "systemctl", "start", "etcd.service")
	waitEtcdCluster(t, name, "Running again", 90*time.Second, func(ec v1.EtcdCluster) bool { return ec.Status.Phase == v1.PhaseRunning })
	// cp-c's control plane lost its local etcd member meanwhile: the test goes on only once every
	// control-plane static pod is Ready again, so the cluster is left as it was found.
	waitControlPlaneReady(t, 5*time.Minute)
	evs := kubectl(t, "get", "events.events.k8s.io", "-n", deploy.DefaultNamespace, "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	for _, want := range []string{"PhaseRunning", "PhaseDegraded", "OneFailureFromQuorumLoss"} {
		if !strings.Contains(evs, want) {
			t.Errorf("no %s event: %q", want, evs)
		}
	}

	// The Lease holder's pod deleted: another replica takes over, the Deployment is whole again.
	holder := leaseHolder(t)
	pod, _, _ := strings.Cut(holder, "_")
	if pod == "" {
		t.Fatalf("Lease %s/%s has no holder", deploy.DefaultNamespace, deploy.Name)
	}
	kubectl(t, "delete", "pod", "-n", deploy.DefaultNamespace, pod, "--wait=false")
	deadline := time.Now().Add(90 * time.Second)
	start = time.Now()
	for {
		h := leaseHolder(t)
		out, _ := suite.Lab.Kubectl(ctx, "get", "deployment", "-n", deploy.DefaultNamespace, deploy.Name, "-o", "jsonpath={.status.availableReplicas}")
		if h != "" && !strings.HasPrefix(h, pod+"_") && strings.TrimSpace(out) == "2" {
			t.Logf("Lease taken over by %s, 2 replicas available, %s after the holder's pod was deleted", h, time.Since(start).Round(100*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting %s: Lease holder %q, available replicas %q", pod, h, out)
		}
		time.Sleep(time.Second)
	}

	// Admission is the API server's: a bad EtcdCluster is refused naming the field.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: hactl.io/v1alpha1
kind: EtcdCluster
metadata: {name: bad, namespace: `+deploy.DefaultNamespace+`}
spec:
  clusterID: c1a55
  members: [{name: m0, clientURL: "http://10.0.0.1:2379"}]
  clientCertificateSecret: {name: x}
  backup:
    objectStore: {endpoint: "minio:9000", bucket: etcd-backups}
    credentialsSecret: {name: s3}
    every: 7m
    retention: {keepLast: 0}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := suite.Lab.Kubectl(ctx, "create", "-f", bad)
	if err == nil {
		t.Errorf("a bad EtcdCluster was accepted: %s", out)
	} else {
		for _, want := range []string{"spec.members[0].clientURL", "spec.backup.every", "spec.backup.retention.keepLast"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the API server's refusal does not name %s: %v", want, err)
			}
		}
	}

	suite.MustHactl(t, "operator", "remove", "-f", spec, "--yes")
	if out, _ := suite.Lab.Kubectl(ctx, "get", "deployment", "-n", deploy.DefaultNamespace, deploy.Name, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("the Deployment is still there after remove: %s", out)
	}
	if out := kubectl(t, "get", "crd", "etcdclusters.hactl.io", "-o", "name"); !strings.Contains(out, "etcdclusters.hactl.io") {
		t.Error("remove deleted the CRD")
	}
}

// waitControlPlaneReady waits until every control-plane static pod (kubeadm's tier=control-plane
// label) is Ready (kubelet may be backing off one that failed its probes while a member was down)
// and logs how long that took.
func waitControlPlaneReady(t *testing.T, within time.Duration) {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < within {
		out, err := suite.Lab.Kubectl(context.Background(), "get", "pods", "-n", "kube-system", "-l", "tier=control-plane", "--request-timeout", "10s",
			"-o", `jsonpath={range .items[*]}{.metadata.name}{" "}{range .status.conditions[?(@.type=="Ready")]}{.status}{end}{"\n"}{end}`)
		if err == nil {
			var notReady []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[1] != "True" || len(f) == 1 {
					notReady = append(notReady, f[0])
				}
			}
			if len(notReady) == 0 && out != "" {
				t.Logf("every control-plane pod Ready %s after etcd came back", time.Since(start).Round(100*time.Millisecond))
				return
			}
			last = "not Ready: " + strings.Join(notReady, ", ")
		} else {
			last = err.Error()
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("control-plane pods not all Ready %s after etcd came back on cp-c: %s", within, last)
}
