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

// TestList: phases are inserted and replaced by title; the original list is never modified; an
// unknown title is an *UnknownPhaseError naming the list.
func TestList(t *testing.T) {
	f := func(name string) Phase { return Func{Name: name, Fn: func(context.Context) error { return nil }} }
	l := List{f("preflight"), f("etcd/install"), f("etcd/start"), f("etcd/wait")}
	got, err := l.InsertBefore("etcd/install", f("restore/check"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err = got.InsertBefore("etcd/start", f("restore/ship"), f("restore/seed")); err != nil {
		t.Fatal(err)
	}
	if got, err = got.InsertAfter("etcd/wait", f("restore/verify")); err != nil {
		t.Fatal(err)
	}
	if got, err = got.Replace("preflight", f("connect")); err != nil {
		t.Fatal(err)
	}
	want := []string{"connect", "restore/check", "etcd/install", "restore/ship", "restore/seed", "etcd/start", "etcd/wait", "restore/verify"}
	if !reflect.DeepEqual(Titles(got), want) {
		t.Errorf("titles %v, want %v", Titles(got), want)
	}
	if !reflect.DeepEqual(Titles(l), []string{"preflight", "etcd/install", "etcd/start", "etcd/wait"}) {
		t.Errorf("the original list changed: %v", Titles(l))
	}
	if l.Index("etcd/start") != 2 || l.Index("nope") != -1 {
		t.Errorf("Index: %d %d", l.Index("etcd/start"), l.Index("nope"))
	}
	for _, op := range []func() (List, error){
		func() (List, error) { return l.InsertBefore("nope", f("x")) },
		func() (List, error) { return l.InsertAfter("nope", f("x")) },
		func() (List, error) { return l.Replace("nope", f("x")) },
	} {
		var ue *UnknownPhaseError
		if _, err := op(); !errors.As(err, &ue) || ue.Title != "nope" || len(ue.Have) != 4 {
			t.Errorf("err = %v, want *UnknownPhaseError for nope", err)
		}
	}
}
