//go:build e2e

// Package kinde2e runs hactl as users run it in CI: against a real kind cluster (sigs.k8s.io/kind
// v0.33.0, its node image built offline by the lab, docs/kind.md), through the steps of
// examples/github-actions.yaml themselves. The lab brings up etcd hosts cp-a/b/c (zones az-a/b/c)
// and the object store; hactl builds the etcd cluster the operator in kind watches. kind's nodes
// join the lab network, so the operator reaches those members and MinIO as it would reach a
// staging etcd from a CI runner. One lab, always torn down (kind's nodes are hactl-lab-ci-*, so the
// lab's teardown removes them too); run with `make e2e`.
package kinde2e

import (
	"os"
	"testing"

	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/kind", lab.Options{Members: 3, ObjectStore: true, Dir: ".lab-e2e-kind"}, &suite))
}
