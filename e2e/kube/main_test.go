//go:build e2e

// Package kubee2e runs the real hactl against the lab's Kubernetes shape: etcd + control plane on
// cp-a/b/c, workers w-a/b/c (zones az-a/b/c), HAProxy + Keepalived on lb-a/lb-b holding the VIP,
// and the mirror serving the apt repository (containerd and the runtime packages) and the
// Kubernetes binaries, the object store (MinIO) the operator snapshots into, and spare-c, a plain
// host the operator may move an etcd member onto. hactl builds the whole cluster; the lab only
// prepares the machines. One lab for the package, the Kubernetes bootstrap done once, always torn
// down; one test, TestKube, runs the phases in their order (see there); run with `make e2e`.
package kubee2e

import (
	"os"
	"strings"
	"testing"

	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/kube", lab.Options{Members: 3, Workers: true, ObjectStore: true, Spares: true, Dir: ".lab-e2e-kube"}, &suite))
}

// phase is one part of TestKube, a subtest of it. A phase with needs continues from the state those
// earlier phases leave (it has no fixture of its own); the others start with their own fixture (a
// bootstrap of the lab's spec, which converges the cluster, and the kubeconfig).
type phase struct {
	name  string
	needs []string
	fn    func(t *testing.T)
}

// step is one step of a phase; each step needs the steps before it (runSteps).
type step struct {
	name string
	fn   func(t *testing.T)
}

// TestKube is the package's one ordered test: its phases run in this order, which is part of what
// is tested (no file-name order):
//
//   - kubernetes: hactl builds etcd, the load balancer, 3 control planes and 3 workers, and rides
//     out the faults of testKubernetes;
//   - load balancer: on that cluster, what e2e/lb checked of the kubeadm control plane behind the
//     VIP (HAProxy's checks, VIP failover, the drills, a rolled-back reload, a restore of etcd under
//     the running control plane);
//   - kubeconfig context, scheduler: --context, and hactl-scheduler;
//   - operator (after the scheduler: it stops cp-c's etcd member, after which the scheduler's
//     static-pod restarts were seen not to come back in time), then quorum lost (it uses the image
//     the operator phase imports, and fails naming it when a node lacks it; it must leave spare-c
//     unused), then heal, last: it destroys cp-c for good.
//
// A phase whose needs failed is not run: it fails at once, naming them (never skipped as if it
// had passed), so TestKube and the package fail. Inside a phase, the first step that fails ends
// the phase (runSteps).
func TestKube(t *testing.T) {
	phases := []phase{
		{name: "kubernetes", fn: testKubernetes},
		{name: "load balancer", needs: []string{"kubernetes"}, fn: testLoadBalancer},
		{name: "kubeconfig context", fn: testKubeconfigContext},
		{name: "scheduler", fn: testScheduler},
		{name: "operator", fn: testOperator},
		{name: "quorum lost", fn: testOperatorQuorumLost},
		{name: "heal", fn: testOperatorHeal},
	}
	failed := map[string]bool{}
	for _, p := range phases {
		fn := p.fn
		var blocked []string
		for _, n := range p.needs {
			if failed[n] {
				blocked = append(blocked, n)
			}
		}
		if len(blocked) > 0 {
			fn = func(t *testing.T) {
				t.Fatalf("not run: it continues from phase %s, which failed", strings.Join(blocked, ", "))
			}
		}
		if !t.Run(p.name, fn) {
			failed[p.name] = true
		}
	}
}

// runSteps runs steps in order, each as a subtest of t. The first that fails ends t (t.Fatalf
// naming it): the later steps depend on it and are not run, and t fails.
func runSteps(t *testing.T, steps []step) {
	t.Helper()
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			t.Fatalf("step %q failed; later steps depend on it", s.name)
		}
	}
}
