//go:build e2e

// Package lbe2e runs the real hactl against the lab's load balancer and Kubernetes shape: etcd on
// cp-a/b/c, HAProxy + Keepalived on lb-a/lb-b holding the VIP, and a real kubeadm control plane on
// cp-a/b/c built on both (kubelet, containerd and images inside the lab hosts). One lab for the
// package, always torn down; run with `make e2e`.
package lbe2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var (
	suite  harness.Suite
	labDir string
)

func TestMain(m *testing.M) {
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/lb:", err)
		os.Exit(1)
	}
	labDir = filepath.Join(root, ".lab-e2e-lb")
	os.Exit(harness.Main(m, "e2e/lb", lab.Options{Members: 3, Dir: labDir}, &suite))
}
