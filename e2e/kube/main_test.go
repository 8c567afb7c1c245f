//go:build e2e

// Package kubee2e runs the real hactl against the lab's Kubernetes shape: etcd + control plane on
// cp-a/b/c, workers w-a/b/c (zones az-a/b/c), HAProxy + Keepalived on lb-a/lb-b holding the VIP,
// and the mirror serving the apt repository (containerd and the runtime packages) and the
// Kubernetes binaries, the object store (MinIO) the operator snapshots into, and spare-c, a plain
// host the operator may move an etcd member onto. hactl builds the whole cluster; the lab only
// prepares the machines. One lab
// for the package (the later scheduler and operator suites extend it), the Kubernetes bootstrap done
// once, always torn down; run with `make e2e`.
package kubee2e

import (
	"os"
	"testing"

	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/kube", lab.Options{Members: 3, Workers: true, ObjectStore: true, Spares: true, Dir: ".lab-e2e-kube"}, &suite))
}
