//go:build e2e

// Package lbe2e runs the real hactl against what needs a load balancer lab of its own: bad load
// balancer specs refused before any host is contacted (TestLoadBalancerSpecs), and the user's own
// load balancer (spec.loadBalancer.external, a plain HAProxy on lb-b) in front of the kubeadm control
// plane hactl builds on cp-a/b/c, whose kubelets and etcd peers talk over the lab's internal network
// (TestExternalLoadBalancer). Each test needs only the lab, nothing the other did. hactl's own
// HAProxy + Keepalived and VIP in front of a kubeadm control plane are tested in e2e/kube (TestKube's
// load balancer phase), on the cluster that suite bootstraps anyway. One lab for the package, always
// torn down; run with `make e2e`.
package lbe2e

import (
	"os"
	"testing"

	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/lb", lab.Options{Members: 3, Kubernetes: true, InternalNetwork: true, Dir: ".lab-e2e-lb"}, &suite))
}
