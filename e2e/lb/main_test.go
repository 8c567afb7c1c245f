//go:build e2e

// Package lbe2e runs the real hactl against the lab's load balancer and Kubernetes shape: etcd on
// cp-a/b/c, HAProxy + Keepalived on lb-a/lb-b holding the VIP, and a real kubeadm control plane on
// cp-a/b/c built on both (kubelet, containerd and images inside the lab hosts). One lab for the
// package, always torn down; run with `make e2e`.
package lbe2e

import (
	"os"
	"testing"

	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/lb", lab.Options{Members: 3, Dir: ".lab-e2e-lb"}, &suite))
}
