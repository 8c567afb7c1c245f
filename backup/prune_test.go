package backup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// synthetic builds a listing of snapshots at the given times (oldest first), verified at the
// indexes in verified.
func synthetic(times []string, verified ...int) *Listing {
	l := &Listing{Prefix: "lab/snapshots/"}
	for i, ts := range times {
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			panic(err)
		}
		stem, _ := Stem(t, int64(i+1), "m0", "")
		s := Snapshot{Stem: stem, Time: t, Revision: int64(i + 1), Data: ObjectInfo{Key: l.Prefix + stem + ".db"},
			Metadata: &Metadata{Key: l.Prefix + stem + ".db", MetadataKey: l.Prefix + stem + ".json"}}
		if slices.Contains(verified, i) {
			s.Verified = &VerifiedMarker{Key: s.Data.Key}
		}
		l.Snapshots = append(l.Snapshots, s)
	}
	return l
}

func TestPlan(t *testing.T) {
	// Every 20 minutes over two days, oldest first.
	var every20 []string
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 144 {
		every20 = append(every20, start.Add(time.Duration(i)*20*time.Minute).Format(time.RFC3339))
	}
	tests := []struct {
		name     string
		times    []string
		verified []int
		policy   Policy
		keep     []int // indexes kept, ascending
	}{
		{"keep-last 3", every20[:6], nil, Policy{KeepLast: 3}, []int{3, 4, 5}},
		{"keep-last more than exist", every20[:2], nil, Policy{KeepLast: 5}, []int{0, 1}},
		// 6 snapshots in 2 hours: the newest of each hour.
		{"keep-hourly 2", every20[:6], nil, Policy{KeepHourly: 2}, []int{2, 5}},
		{"keep-hourly 1 + keep-last 2", every20[:6], nil, Policy{KeepLast: 2, KeepHourly: 1}, []int{4, 5}},
		{"keep-daily 2 over two days", every20, nil, Policy{KeepDaily: 2}, []int{71, 143}},
		{"keep-daily 1 keep-hourly 3", every20, nil, Policy{KeepDaily: 1, KeepHourly: 3}, []int{137, 140, 143}},
		{"newest verified kept", every20[:6], []int{1}, Policy{KeepLast: 2}, []int{1, 4, 5}},
		{"only the newest verified counts", every20[:6], []int{0, 2}, Policy{KeepLast: 1}, []int{2, 5}},
		{"hours with gaps count only hours that have one", []string{"2026-12-01T01:10:00Z", "2026-12-01T05:10:00Z", "2026-12-01T05:50:00Z"}, nil, Policy{KeepHourly: 2}, []int{0, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := synthetic(tc.times, tc.verified...)
			plan := Plan(l, tc.policy, start, time.Hour)
			var kept []int
			for _, d := range plan.Decisions {
				if d.Keep {
					kept = append(kept, int(d.Snapshot.Revision-1))
				}
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tc.keep) {
				t.Errorf("kept %v, want %v", kept, tc.keep)
			}
			if len(plan.Deletions())+len(kept) != len(tc.times) {
				t.Errorf("%d deletions + %d kept != %d", len(plan.Deletions()), len(kept), len(tc.times))
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (Policy{}).Validate(); err != ErrKeepsNothing {
		t.Errorf("empty policy: %v", err)
	}
	if err := (Policy{KeepLast: -1, KeepDaily: 3}).Validate(); err == nil {
		t.Error("negative accepted")
	}
	if err := (Policy{KeepDaily: 1}).Validate(); err != nil {
		t.Error(err)
	}
}

// recordingStore records Remove calls (Apply's order) and fails nothing.
type recordingStore struct {
	Store
	removed []string
}

func (r *recordingStore) Remove(_ context.Context, key string) error {
	r.removed = append(r.removed, key)
	return nil
}

func (r *recordingStore) AbortIncomplete(_ context.Context, key string) error {
	r.removed = append(r.removed, "abort "+key)
	return nil
}

// TestApplyOrder: metadata before marker before data, for each deleted snapshot; orphans and
// incomplete uploads after.
func TestApplyOrder(t *testing.T) {
	l := synthetic([]string{"2026-12-01T00:00:00Z", "2026-12-01T01:00:00Z"})
	l.Orphans = []ObjectInfo{{Key: "lab/snapshots/x.db", LastModified: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}}
	l.Incomplete = []IncompleteUpload{{Key: "lab/snapshots/y.db", Initiated: time.Date(2026, 12, 1, 1, 59, 0, 0, time.UTC)}}
	plan := Plan(l, Policy{KeepLast: 1}, time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), time.Hour)
	if len(plan.Orphans) != 1 || len(plan.Incomplete) != 0 {
		t.Fatalf("grace: orphans %v incomplete %v", plan.Orphans, plan.Incomplete)
	}
	rs := &recordingStore{}
	var lines []string
	if err := Apply(context.Background(), rs, plan, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }); err != nil {
		t.Fatal(err)
	}
	stem := l.Snapshots[0].Stem
	want := []string{"lab/snapshots/" + stem + ".json", "lab/snapshots/" + stem + ".verified.json", "lab/snapshots/" + stem + ".db", "lab/snapshots/x.db"}
	if !slices.Equal(rs.removed, want) {
		t.Errorf("removed\n%s\nwant\n%s", strings.Join(rs.removed, "\n"), strings.Join(want, "\n"))
	}
}

// TestAddDeltas: deltas go with the snapshots they continue: those ending at or before the oldest
// kept snapshot's revision are deleted, later ones kept.
func TestAddDeltas(t *testing.T) {
	snap := func(rev int64) Snapshot {
		return Snapshot{Stem: fmt.Sprint(rev), Time: time.Unix(rev, 0), Metadata: &Metadata{Revision: rev, Key: fmt.Sprint(rev)}}
	}
	l := &Listing{Snapshots: []Snapshot{snap(10), snap(50), snap(90)}}
	plan := Plan(l, Policy{KeepLast: 2}, time.Unix(100, 0), time.Hour)
	d := func(from, to int64) Delta {
		return Delta{Metadata: &DeltaMetadata{FromRevision: from, ToRevision: to}}
	}
	plan.AddDeltas([]Delta{d(10, 30), d(30, 50), d(50, 70), d(70, 95)})
	if len(plan.Deltas) != 2 || plan.Deltas[1].Metadata.ToRevision != 50 {
		t.Errorf("deltas to delete %+v, want the two ending at or before revision 50 (the oldest kept)", plan.Deltas)
	}
	if plan.Empty() {
		t.Error("a plan deleting deltas is Empty")
	}
}
