package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-multierror"
)

// Policy is a retention policy in restic's style: a snapshot is kept when any rule keeps it.
type Policy struct {
	// KeepLast keeps the newest KeepLast snapshots.
	KeepLast int `json:"keepLast"`
	// KeepHourly keeps the newest snapshot of each of the KeepHourly most recent hours (UTC) that
	// have one; KeepDaily likewise per day (UTC).
	KeepHourly int `json:"keepHourly"`
	KeepDaily  int `json:"keepDaily"`
}

// ErrKeepsNothing is returned by Policy.Validate for a policy that would keep no snapshot.
var ErrKeepsNothing = errors.New("the retention policy keeps no snapshot: set --keep-last, --keep-hourly or --keep-daily to at least 1")

// Validate refuses negative counts and a policy that keeps nothing.
func (p Policy) Validate() error {
	if p.KeepLast < 0 || p.KeepHourly < 0 || p.KeepDaily < 0 {
		return fmt.Errorf("retention counts must not be negative (keep-last %d, keep-hourly %d, keep-daily %d)", p.KeepLast, p.KeepHourly, p.KeepDaily)
	}
	if p.KeepLast+p.KeepHourly+p.KeepDaily == 0 {
		return ErrKeepsNothing
	}
	return nil
}

// Decision is what the plan does with one snapshot and why.
type Decision struct {
	Snapshot *Snapshot `json:"-"`
	Key      string    `json:"key"`
	Time     time.Time `json:"time"`
	Keep     bool      `json:"keep"`
	// Reasons name the rules keeping it ("last 3", "hourly 2026-12-01T03", "daily 2026-12-01",
	// "newest verified").
	Reasons []string `json:"reasons,omitempty"`
}

// PrunePlan is what Prune would do.
type PrunePlan struct {
	Policy    Policy     `json:"policy"`
	Decisions []Decision `json:"decisions"` // newest first
	// Orphans are data objects without metadata older than the grace period; Incomplete the
	// multipart uploads older than it; Leftovers metadata or marker objects whose data is gone.
	Orphans    []ObjectInfo       `json:"orphans,omitempty"`
	Incomplete []IncompleteUpload `json:"incomplete,omitempty"`
	// Deltas are the delta snapshots deleted with their full snapshots (AddDeltas).
	Deltas []Delta `json:"deltas,omitempty"`

	// prefix is the listing's Prefix (Print shows keys relative to it); listing the listing itself
	// when PlanRetention made the plan (Kept).
	prefix  string
	listing *Listing
}

// Empty reports whether the plan deletes nothing: no snapshot, no orphan, no incomplete upload, no
// delta.
func (p *PrunePlan) Empty() bool {
	return len(p.Deletions())+len(p.Orphans)+len(p.Incomplete)+len(p.Deltas) == 0
}

// AddDeltas adds to the plan the deltas that only continue snapshots it deletes: those ending at
// or before the lowest revision of the snapshots it keeps (a restore starts from a kept snapshot, and
// uses only the deltas after it). With no snapshot kept it adds none.
func (p *PrunePlan) AddDeltas(ds []Delta) {
	oldest, ok := p.oldestKept()
	if !ok {
		return
	}
	for _, d := range ds {
		if d.Metadata.ToRevision <= oldest {
			p.Deltas = append(p.Deltas, d)
		}
	}
}

// oldestKept is the lowest revision of the snapshots the plan keeps (times and revisions need not
// agree); false when it keeps none.
func (p *PrunePlan) oldestKept() (int64, bool) {
	var oldest int64 = -1
	for _, d := range p.Decisions {
		if d.Keep && (oldest < 0 || d.Snapshot.Metadata.Revision < oldest) {
			oldest = d.Snapshot.Metadata.Revision
		}
	}
	return oldest, oldest >= 0
}

// Deletions returns the snapshots the plan deletes, newest first.
func (p *PrunePlan) Deletions() []Decision {
	var out []Decision
	for _, d := range p.Decisions {
		if !d.Keep {
			out = append(out, d)
		}
	}
	return out
}

// Plan applies policy to the listing's snapshots: keep-last, keep-hourly and keep-daily select
// snapshots newest first (the newest of each hour or day counts), their union is kept, and the
// newest verified snapshot is always kept. Orphan data objects and incomplete uploads older than
// grace (relative to now) are cleaned too. The policy must be valid (Policy.Validate).
func Plan(l *Listing, policy Policy, now time.Time, grace time.Duration) *PrunePlan {
	plan := &PrunePlan{Policy: policy, prefix: l.Prefix}
	n := len(l.Snapshots)
	verified := l.NewestVerified()
	hours, days := map[string]bool{}, map[string]bool{}
	for i := n - 1; i >= 0; i-- {
		s := &l.Snapshots[i]
		d := Decision{Snapshot: s, Key: s.Data.Key, Time: s.Time}
		if rank := n - i; rank <= policy.KeepLast {
			d.Reasons = append(d.Reasons, fmt.Sprintf("last %d", rank))
		}
		t := s.Time.UTC()
		if h := t.Format("2006-01-02T15"); !hours[h] && len(hours) < policy.KeepHourly {
			hours[h] = true
			d.Reasons = append(d.Reasons, "hourly "+h)
		}
		if day := t.Format("2006-01-02"); !days[day] && len(days) < policy.KeepDaily {
			days[day] = true
			d.Reasons = append(d.Reasons, "daily "+day)
		}
		if verified == s {
			d.Reasons = append(d.Reasons, "newest verified")
		}
		d.Keep = len(d.Reasons) > 0
		plan.Decisions = append(plan.Decisions, d)
	}
	for _, o := range l.Orphans {
		if now.Sub(o.LastModified) > grace {
			plan.Orphans = append(plan.Orphans, o)
		}
	}
	for _, u := range l.Incomplete {
		if now.Sub(u.Initiated) > grace {
			plan.Incomplete = append(plan.Incomplete, u)
		}
	}
	return plan
}

// Apply carries out the plan: for each deleted snapshot it removes the metadata object FIRST (so
// a half-deleted snapshot is never listed as complete), then the verify marker, then the data;
// then the deltas (metadata first), then it removes the orphans and aborts the incomplete uploads. It goes on after a failure and
// returns every error (go-multierror). progress, when set, gets one line per deletion.
func Apply(ctx context.Context, store Store, plan *PrunePlan, progress func(format string, args ...any)) error {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	var errs *multierror.Error
	for _, d := range plan.Deletions() {
		m := d.Snapshot.Metadata
		keys := []string{m.MetadataKey, verifiedKeyOf(m.MetadataKey), m.Key}
		var err error
		for _, k := range keys {
			if err = store.Remove(ctx, k); err != nil {
				break
			}
		}
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("deleting snapshot %s: %w", m.Key, err))
			continue
		}
		progress("deleted %s", m.Key)
	}
	for _, d := range plan.Deltas {
		var err error
		for _, k := range []string{d.Metadata.MetadataKey, d.Data.Key} { // metadata first: never a complete-looking half
			if err = store.Remove(ctx, k); err != nil {
				break
			}
		}
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("deleting delta %s: %w", d.Data.Key, err))
			continue
		}
		progress("deleted delta %s (revisions %d-%d, before every kept snapshot)", d.Data.Key, d.Metadata.FromRevision+1, d.Metadata.ToRevision)
	}
	for _, o := range plan.Orphans {
		if err := store.Remove(ctx, o.Key); err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		progress("deleted orphan %s (no metadata, %s old)", o.Key, time.Since(o.LastModified).Round(time.Second))
	}
	for _, u := range plan.Incomplete {
		if err := store.AbortIncomplete(ctx, u.Key); err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		progress("aborted incomplete upload %s (started %s)", u.Key, u.Initiated.UTC().Format(time.RFC3339))
	}
	return errs.ErrorOrNil()
}

// ErrNewestVerified is Delete's refusal of the newest verified snapshot, which nothing deletes.
var ErrNewestVerified = errors.New("the newest verified snapshot is never deleted")

// Delete deletes one snapshot of the listing by its stem, in Apply's order (metadata first, then
// the verify marker, then the data). A stem the listing does not hold is already gone: nil.
// Errors: ErrNewestVerified (nothing deleted), the store's.
func Delete(ctx context.Context, store Store, l *Listing, stem string) error {
	s := l.Find(stem)
	if s == nil {
		return nil
	}
	if s == l.NewestVerified() {
		return fmt.Errorf("snapshot %s: %w", stem, ErrNewestVerified)
	}
	return Apply(ctx, store, &PrunePlan{Decisions: []Decision{{Snapshot: s, Key: s.Data.Key, Time: s.Time}}}, nil)
}
