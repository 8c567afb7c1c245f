//go:build e2e

// Package e2e runs the real hactl binary against the lab (e2e/lab): systemd hosts in containers
// reached over real SSH. One lab per package run, shared by its tests, always torn down. Run with
// `make e2e` (go test -tags e2e -p 1 -timeout ...). The lab cannot be skipped: if this machine
// cannot run it, the suite fails and says why.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e", lab.Options{Members: 5, Dir: ".lab-e2e"}, &suite))
}

// labSpec returns the lab's spec for members members (a fresh copy to modify) without its load
// balancer: this suite is about etcd (e2e/lb covers the load balancer, with the kube-apiservers
// behind it; without them every backend is DOWN and hactl status reports the cluster degraded).
func labSpec(t *testing.T, members int) *v1alpha1.Cluster {
	t.Helper()
	c := suite.Spec(t, members)
	lab.WithoutLoadBalancer(c)
	return c
}

// specPath writes labSpec(members) to <lab dir>/etcd-<members>.yaml (same state dir as the lab's
// own spec) and returns its path.
func specPath(t *testing.T, members int) string {
	t.Helper()
	return harness.WriteSpecIn(t, suite.Lab.Dir(), labSpec(t, members), fmt.Sprintf("etcd-%d.yaml", members))
}
