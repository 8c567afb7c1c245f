package deploy

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/ui"
)

// A dry run prints the manifests (the client certificate's Secret redacted) and contacts nothing:
// no import, no connection, no Nodes, nothing recorded.
func TestRunDryRun(t *testing.T) {
	c := testCluster(t, true)
	var out, progress bytes.Buffer
	ready, err := Run(context.Background(), RunOptions{
		Options:      Options{Cluster: c, Image: "ghcr.io/hactl/hactl-operator:test", DryRun: true},
		ImageArchive: "/nonexistent.tar",
		Nodes:        func(context.Context, *kubeapi.Client) error { return errors.New("Nodes called") },
		Printer:      ui.New(&progress, false, false),
		Out:          &out,
	})
	if err != nil || ready != nil {
		t.Fatalf("Run: %v, %v; want nil, nil", ready, err)
	}
	if !strings.Contains(out.String(), "kind: Deployment") || !strings.Contains(out.String(), "ghcr.io/hactl/hactl-operator:test") {
		t.Errorf("dry run printed no Deployment of the image:\n%s", out.String())
	}
	if progress.Len() > 0 {
		t.Errorf("dry run reported progress: %q", progress.String())
	}
	if where := Where(c, nil); where.Kubeconfig != nil {
		t.Errorf("dry run recorded a location: %+v", where)
	}
}

// Build's refusal comes back before anything is contacted.
func TestRunRefusesBeforeContact(t *testing.T) {
	_, err := Run(context.Background(), RunOptions{Options: Options{Cluster: testCluster(t, false), Image: "x:1"}, Printer: ui.New(&bytes.Buffer{}, false, false)})
	if ue := (*UsageError)(nil); !errors.As(err, &ue) {
		t.Fatalf("Run on a cluster not bootstrapped: %v, want *UsageError", err)
	}
}
