//go:build e2e

// Package drille2e runs the real `hactl drill` against the lab: a 3-member etcd cluster on
// cp-a/b/c (zones az-a, az-b, az-c) with HAProxy + Keepalived on lb-a (az-a) and lb-b (az-b) holding
// the VIP, then the 5-member cluster on cp-a/b/c + etcd-d/e. One lab for the package, always torn
// down; run with `make e2e`. (lb-failover needs kube-apiservers behind the VIP: it is in e2e/lb.)
package drille2e

import (
	"os"
	"testing"

	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/drill", lab.Options{Members: 5, Dir: ".lab-e2e-drill"}, &suite))
}
