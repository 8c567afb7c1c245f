package phase

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

type rec struct{ events []string }

func (r *rec) PhaseStarted(t string) { r.events = append(r.events, "start "+t) }
func (r *rec) PhaseDone(t string, _ time.Duration, err error, skipped string) {
	switch {
	case skipped != "":
		r.events = append(r.events, "skip "+t)
	case err != nil:
		r.events = append(r.events, "fail "+t)
	default:
		r.events = append(r.events, "done "+t)
	}
}

func TestRunner(t *testing.T) {
	boom := errors.New("boom")
	var ran []string
	mk := func(name string, changes bool, cond func() bool, err error) Phase {
		return Func{Name: name, Changes: changes, Condition: cond, Fn: func(context.Context) error {
			ran = append(ran, name)
			return err
		}}
	}
	never := func() bool { return false }
	tests := []struct {
		name    string
		r       Runner
		wantRan []string
		wantEv  []string
		wantErr error
	}{
		{
			name:    "all in order",
			r:       Runner{Phases: []Phase{mk("a", false, nil, nil), mk("b/c", true, nil, nil)}},
			wantRan: []string{"a", "b/c"},
			wantEv:  []string{"start a", "done a", "start b/c", "done b/c"},
		},
		{
			name:    "dry run stops at first mutator",
			r:       Runner{DryRun: true, Phases: []Phase{mk("preflight", false, nil, nil), mk("install", true, nil, nil), mk("after", false, nil, nil)}},
			wantRan: []string{"preflight"},
			wantEv:  []string{"start preflight", "done preflight"},
		},
		{
			name:    "skip by name and prefix, ShouldRun false",
			r:       Runner{Skip: []string{"etcd/"}, Phases: []Phase{mk("etcd/install", true, nil, nil), mk("x", false, never, nil), mk("y", false, nil, nil)}},
			wantRan: []string{"y"},
			wantEv:  []string{"skip etcd/install", "skip x", "start y", "done y"},
		},
		{
			name:    "stops at error",
			r:       Runner{Phases: []Phase{mk("a", false, nil, boom), mk("b", false, nil, nil)}},
			wantRan: []string{"a"},
			wantEv:  []string{"start a", "fail a"},
			wantErr: boom,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran = nil
			r := &rec{}
			tt.r.Reporter = r
			err := tt.r.Run(context.Background())
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(ran, tt.wantRan) {
				t.Errorf("ran %v, want %v", ran, tt.wantRan)
			}
			if !reflect.DeepEqual(r.events, tt.wantEv) {
				t.Errorf("events %v, want %v", r.events, tt.wantEv)
			}
		})
	}
}

func TestRunnerCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Runner{Phases: []Phase{Func{Name: "a", Fn: func(context.Context) error { t.Fatal("ran"); return nil }}}}
	if err := r.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}
