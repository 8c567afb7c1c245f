//go:build e2e

package e2e

import (
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
)

// writer is the drills' writer (harness.Writer).
type writer = harness.Writer

// startWriter starts the writer under /hactl-e2e/<name>/<time>/ on the cluster of labSpec(members)
// (harness.Suite.StartWriter).
func startWriter(t *testing.T, name string, members int) *writer {
	t.Helper()
	return suite.StartWriter(t, name, labSpec(t, members))
}

// startWriterOn is startWriter on the cluster of spec c.
func startWriterOn(t *testing.T, name string, c *v1alpha1.Cluster) *writer {
	t.Helper()
	return suite.StartWriter(t, name, c)
}
