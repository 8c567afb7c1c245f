//go:build e2e

// Package lbe2e runs the real hactl against the lab's load balancer and Kubernetes shape: etcd on
// cp-a/b/c, HAProxy + Keepalived on lb-a/lb-b holding the VIP, and the kubeadm control plane hactl
// builds on cp-a/b/c on both (containerd from the mirror's apt repository, kubelet, images from
// archives). One lab for the package, always torn down; run with `make e2e`.
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
