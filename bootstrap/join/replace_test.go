package join

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/ui"
)

// TestReplaceRefusesBeforeAnyHost: a NEW the spec does not have is refused by Spec before the
// question is made or any host is contacted.
func TestReplaceRefusesBeforeAnyHost(t *testing.T) {
	c := &v1alpha1.Cluster{}
	c.Spec.StateDir = filepath.Join(t.TempDir(), "state")
	res, err := Replace(context.Background(), ReplaceOptions{Spec: c, Old: "etcd-a", New: "nosuch", Printer: ui.New(io.Discard, false, false),
		NewConfirm: func() (func(string) (bool, error), error) { t.Fatal("NewConfirm called"); return nil, nil }})
	if res != nil || err == nil {
		t.Fatalf("got %v, %v; want a refusal", res, err)
	}
	var se *SpecError
	if !errors.As(err, &se) {
		t.Fatalf("refused with %T: %v, want a *SpecError", err, err)
	}
}
