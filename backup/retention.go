package backup

import (
	"context"
	"slices"
	"time"
)

// RetentionOptions say whose snapshots and deltas PlanRetention and Prune look at, and what they
// keep. The one retention path: `hactl backup prune`, `hactl backup now --keep-*` (backup/take) and
// hactl-operator's retention all go through PlanRetention.
type RetentionOptions struct {
	// Prefix and Cluster locate the snapshots (SnapshotsPrefix) and the deltas (DeltasPrefix):
	// spec.backup.objectStore.prefix ("" for none) and the cluster's name.
	Prefix, Cluster string
	// Policy is what is kept (Plan); it must be valid (Policy.Validate).
	Policy Policy
	// Now is the time Grace counts back from (zero: time.Now()); Grace is how old an orphan data
	// object or an incomplete upload must be before it is removed (a run in progress is younger).
	Now   time.Time
	Grace time.Duration
	// Listing is the snapshots as the caller already listed them (List of Prefix and Cluster); nil
	// lists them.
	Listing *Listing
}

// PlanRetention plans one retention pass over the cluster's store: it lists the snapshots (unless
// o.Listing is set) and the deltas, applies o.Policy (Plan: the newest verified snapshot is always
// kept; orphans and incomplete uploads older than o.Grace go), and adds the deltas that end at or
// before every kept snapshot's revision (AddDeltas; only their metadata objects are read, as
// ListDeltas reads them). It deletes nothing.
//
// Errors: the policy's (Policy.Validate: ErrKeepsNothing or negative counts), the store's listing
// errors (List, ListDeltas), unwrapped.
func PlanRetention(ctx context.Context, store Store, o RetentionOptions) (*PrunePlan, error) {
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	l := o.Listing
	if l == nil {
		var err error
		if l, err = List(ctx, store, o.Prefix, o.Cluster); err != nil {
			return nil, err
		}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	plan := Plan(l, o.Policy, now, o.Grace)
	plan.listing = l
	oldest, ok := plan.oldestKept()
	if !ok {
		return plan, nil // no snapshot kept: no delta goes (AddDeltas)
	}
	// Only the deltas AddDeltas could take: a pass reads the metadata of what it deletes, not of
	// the whole chain an agent keeps writing.
	ds, err := listDeltas(ctx, store, o.Prefix, o.Cluster, func(_, to int64) bool { return to <= oldest })
	if err != nil {
		return nil, err
	}
	plan.AddDeltas(ds)
	return plan, nil
}

// Prune runs one retention pass without asking: PlanRetention, then Apply when the plan deletes
// anything (progress, when set, gets one line per deletion). The plan it returns says what was
// removed (Deletions, Deltas, Orphans, Incomplete) and kept (Kept); it is nil when planning failed,
// and set when Apply failed (some deletions may have happened: list again before trusting Kept).
//
// Errors: PlanRetention's; Apply's (go-multierror of every deletion that failed), unwrapped.
func Prune(ctx context.Context, store Store, o RetentionOptions, progress func(format string, args ...any)) (*PrunePlan, error) {
	plan, err := PlanRetention(ctx, store, o)
	if err != nil {
		return nil, err
	}
	if plan.Empty() {
		return plan, nil
	}
	return plan, Apply(ctx, store, plan, progress)
}

// Kept returns the listing the plan was made from (PlanRetention) with only the snapshots it keeps,
// oldest first as in a Listing; its Orphans, Incomplete and Problems are the listing's as listed.
// Nil for a plan not made by PlanRetention.
func (p *PrunePlan) Kept() *Listing {
	if p.listing == nil {
		return nil
	}
	kept := *p.listing
	kept.Snapshots = nil
	for _, d := range p.Decisions {
		if d.Keep {
			kept.Snapshots = append(kept.Snapshots, *d.Snapshot)
		}
	}
	slices.Reverse(kept.Snapshots) // Decisions are newest first; a Listing is oldest first
	return &kept
}
