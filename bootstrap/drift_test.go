package bootstrap

import (
	"bytes"
	"context"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/ui"
)

// A first bootstrap of a Kubernetes spec (no state dir yet) asks no API about the operator's heals.
func TestCheckOperatorDriftBeforeTheClusterFormed(t *testing.T) {
	c := &v1alpha1.Cluster{}
	c.Spec.Kubernetes = &v1alpha1.Kubernetes{}
	c.Spec.StateDir = t.TempDir()
	var out bytes.Buffer // verbose: an API asked (or not reached) would leave a debug line
	if err := checkOperatorDrift(context.Background(), c, nil, nil, ui.New(&out, true, false)); err != nil {
		t.Errorf("no state dir: %v, want nil", err)
	}
	if out.Len() > 0 {
		t.Errorf("no state dir: the API was asked: %q", out.String())
	}
}
