//go:build e2e

package lbe2e

import (
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
)

// refusedLocally runs `hactl bootstrap -f spec` and wants exit 2 naming want, with no SSH
// connection seen by host's sshd (the input is refused before any host is contacted).
func refusedLocally(t *testing.T, spec, host, want string) {
	t.Helper()
	before := suite.ExecOn(t, host, "journalctl", "-u", "ssh", "--no-pager", "-q", "-o", "cat")
	r := suite.Hactl(t, "bootstrap", "-f", spec)
	if r.Code != 2 || !strings.Contains(r.Stderr, want) {
		t.Errorf("exit %d; want 2 naming %s:\n%s", r.Code, want, r.Stderr)
	}
	if after := suite.ExecOn(t, host, "journalctl", "-u", "ssh", "--no-pager", "-q", "-o", "cat"); after != before {
		t.Errorf("%s's sshd saw a connection for an invalid spec:\n%s", host, strings.TrimPrefix(after, before))
	}
}

// TestLoadBalancerSpecs: bad load balancer specs exit 2 naming the field before any host is
// contacted (lb-a's sshd sees no connection). It needs the lab's hosts only, nothing bootstrapped:
// the kubeadm control plane behind hactl's VIP is tested in e2e/kube (TestKube's load balancer
// phase), on the cluster that suite builds anyway.
func TestLoadBalancerSpecs(t *testing.T) {
	for _, tc := range []struct {
		edit func(*v1alpha1.LoadBalancer)
		want string
	}{
		{func(l *v1alpha1.LoadBalancer) { l.VIP = "172.28.0.21/24" }, "spec.loadBalancer.vip"},
		{func(l *v1alpha1.LoadBalancer) { l.VIP = "10.9.9.9/24" }, "spec.loadBalancer.vip"},
		{func(l *v1alpha1.LoadBalancer) { l.VirtualRouterID = 256 }, "spec.loadBalancer.virtualRouterID"},
		{func(l *v1alpha1.LoadBalancer) { l.Auth = &v1alpha1.VRRPAuth{Env: "HACTL_E2E_UNSET_SECRET"} }, "spec.loadBalancer.auth"},
	} {
		c := suite.Spec(t, 3)
		tc.edit(c.Spec.LoadBalancer)
		refusedLocally(t, harness.WriteSpec(t, c, "bad.yaml"), "lb-a", tc.want)
	}
}
