package etcdphases

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

// TestPlanDryRunWithoutPKI: a dry run before the first bootstrap plans every file, marks the
// certificates that do not exist yet "to be created", and writes nothing to the state dir.
func TestPlanDryRunWithoutPKI(t *testing.T) {
	f := newPlanFixture(t, 3, true)
	if err := (&Plan{f.b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
		f.check(n, created)
		for _, df := range f.b.ledger.plans[n].Upload {
			isCert := filepath.Dir(df.Path) == remotePKIDir
			switch {
			case isCert && (df.Note != "to be created" || df.Sum != "" || df.Data != nil):
				t.Errorf("%s: %s note %q sum %q, want to be created without content", n, df.Path, df.Note, df.Sum)
			case !isCert && (df.Note != "new" || df.Sum == ""):
				t.Errorf("%s: %s note %q sum %q, want new with a checksum", n, df.Path, df.Note, df.Sum)
			}
		}
	}
	if _, err := os.Stat(f.stateDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dry run touched the state dir %s: %v", f.stateDir, err)
	}
	out := f.out.String()
	for _, s := range []string{"a new etcd CA and certificates will be created", "to be created: ca.crt ca.key server.crt"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestPlanDryRunWithPKI: once the PKI exists a dry run plans with real checksums, so a healthy
// cluster shows nothing to do.
func TestPlanDryRunWithPKI(t *testing.T) {
	real := newPlanFixture(t, 3, false)
	dry, err := New(runctx.New(real.b.run.Spec, ui.New(&bytes.Buffer{}, false, false), true, provision.SpecOptions{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&PKI{dry}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if dry.st.Token != real.b.st.Token {
		t.Fatalf("dry run made a new token %s, the state dir holds %s", dry.st.Token, real.b.st.Token)
	}
	f := &planFixture{t: t, b: dry, out: &bytes.Buffer{}, stateDir: real.stateDir}
	f.installed("cp-a", "cp-b", "cp-c")
	f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
	if err := (&Plan{dry}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
		f.check(n, unchanged)
	}
}

func TestAnyUploadsAnyStarts(t *testing.T) {
	file := []DesiredFile{{Path: remoteMarker}}
	for _, tc := range []struct {
		name            string
		plans           []HostPlan
		uploads, starts bool
	}{
		{"no plans", nil, false, false},
		{"all unchanged", []HostPlan{{Action: report.ActionUnchanged}, {Action: report.ActionUnchanged}}, false, false},
		{"upload without restart", []HostPlan{{Action: report.ActionUnchanged, Upload: file}, {Action: report.ActionUnchanged}}, true, false},
		{"update", []HostPlan{{Action: report.ActionUnchanged}, {Action: report.ActionUpdate, Upload: file, Restart: true}}, true, true},
		{"start", []HostPlan{{Action: report.ActionStart, Restart: true}}, false, true},
		{"create", []HostPlan{{Action: report.ActionCreate, Upload: file, Restart: true}}, true, true},
		{"resume of a running member", []HostPlan{{Action: report.ActionResume}}, false, true},
		{"join pending promotion", []HostPlan{{Action: report.ActionUnchanged}, {Action: report.ActionJoin}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Group{ledger: ledger{plans: map[string]*HostPlan{}}}
			for i := range tc.plans {
				b.ledger.plans[fmt.Sprint("h", i)] = &tc.plans[i]
			}
			if got := (&Install{b}).ShouldRun(); got != tc.uploads {
				t.Errorf("anyUploads = %v, want %v", got, tc.uploads)
			}
			if got := (&Start{G: b, Name: PhaseStart}).ShouldRun(); got != tc.starts {
				t.Errorf("anyStarts = %v, want %v", got, tc.starts)
			}
		})
	}
}

// The refusal to create a second CA when the hosts carry the cluster and the state dir is gone is
// now a recovery: see TestStateRecovery and TestStateRecoveryRefusals (recover_test.go).
