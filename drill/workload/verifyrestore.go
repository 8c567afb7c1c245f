package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RestoreVerification is the read-back after a disaster at t0 and a restore from a snapshot: a
// restore brings the cluster back to the snapshot's point in time, so writes acknowledged before t0
// are split at that point — those up to it must be present, those after it are lost by design (the
// RPO) — and every write acknowledged after t0, by the restored cluster, must be present. Counts are
// exact; Violations are capped at MaxListed per kind.
type RestoreVerification struct {
	Prefix string `json:"prefix"`
	// Revision is the store revision the prefix was read at; Keys the keys found under it.
	Revision int64 `json:"revision"`
	Keys     int   `json:"keys"`

	// AckedBefore counts writes acknowledged before t0; HeldBefore those of them present with their
	// value and acknowledged revision, LostBefore those absent.
	AckedBefore int `json:"ackedBefore"`
	HeldBefore  int `json:"heldBefore"`
	LostBefore  int `json:"lostBefore"`
	// NewestHeld is the acknowledgement time of the newest write acknowledged before t0 that the
	// restored cluster holds, NewestHeldSeq its sequence number (zero time and 0: none held).
	NewestHeld    time.Time `json:"newestHeld,omitzero"`
	NewestHeldSeq int64     `json:"newestHeldSeq,omitempty"`
	// LostFrom and LostTo are the acknowledgement times of the oldest and newest lost write
	// acknowledged before t0 (zero: none lost): the window of writes the restore gave up.
	LostFrom time.Time `json:"lostFrom,omitzero"`
	LostTo   time.Time `json:"lostTo,omitzero"`
	// Gaps counts absent writes whose revision is below that of a write the restore kept: a hole
	// before the restored point, which a consistent snapshot can never explain (a failure).
	// Revisions, not acknowledgement times: concurrent puts are acknowledged out of revision order.
	Gaps int `json:"gaps"`

	// AckedAfter counts writes acknowledged after t0 (by the restored cluster), HeldAfter and
	// LostAfter those present and absent. LostAfter > 0 is a failure.
	AckedAfter int `json:"ackedAfter"`
	HeldAfter  int `json:"heldAfter"`
	LostAfter  int `json:"lostAfter"`
	// Mismatched counts acknowledged writes present with another value or revision (a failure).
	Mismatched int `json:"mismatched"`

	Violations []Violation `json:"violations,omitempty"`
	// Summary is one line for people.
	Summary string `json:"summary"`
}

// OK reports whether the restore kept what it had to: no gap before the restored point in time, no
// write lost or changed after t0, nothing mismatched.
func (v *RestoreVerification) OK() bool { return v.Gaps == 0 && v.LostAfter == 0 && v.Mismatched == 0 }

// VerifyRestore reads every key under r.Prefix at one revision (as Verify does) and classifies r's
// acknowledged writes around t0, the instant the whole cluster was down (see
// RestoreVerification). Unacknowledged writes are ignored: etcd may or may not have applied them.
// The error is non-nil only when the listing fails (wrapped, %w) or the arguments are unusable
// (ErrInvalidConfig).
func VerifyRestore(ctx context.Context, cli *clientv3.Client, r *Record, t0 time.Time) (*RestoreVerification, error) {
	if cli == nil || r == nil || t0.IsZero() {
		return nil, fmt.Errorf("%w: verify of a restore needs a client, a record and t0", ErrInvalidConfig)
	}
	if err := ValidatePrefix(r.Prefix); err != nil {
		return nil, err
	}
	store, rev, err := list(ctx, cli, r.Prefix, listPageSize)
	if err != nil {
		return nil, err
	}
	return checkRestore(r, store, rev, t0), nil
}

// checkRestore is VerifyRestore without I/O.
func checkRestore(r *Record, store map[string]storedKV, rev int64, t0 time.Time) *RestoreVerification {
	v := &RestoreVerification{Prefix: r.Prefix, Revision: rev, Keys: len(store)}
	listed := map[Kind]int{}
	add := func(x Violation) {
		if listed[x.Kind] < MaxListed {
			listed[x.Kind]++
			v.Violations = append(v.Violations, x)
		}
	}
	var lostBefore []Write
	var heldRev int64 // the highest revision of a write kept from before t0
	for _, w := range r.Writes {
		if !w.Acked {
			continue
		}
		got, found := store[w.Key]
		before := w.Done.Before(t0)
		if before {
			v.AckedBefore++
		} else {
			v.AckedAfter++
		}
		switch {
		case !found && before:
			v.LostBefore++
			lostBefore = append(lostBefore, w)
			if v.LostFrom.IsZero() || w.Done.Before(v.LostFrom) {
				v.LostFrom = w.Done
			}
			if w.Done.After(v.LostTo) {
				v.LostTo = w.Done
			}
		case !found:
			v.LostAfter++
			add(Violation{Kind: KindLost, Key: w.Key, Seq: w.Seq, Revision: w.Revision,
				Detail: fmt.Sprintf("write %d (%s) acknowledged by the restored cluster at revision %d is not in the store", w.Seq, w.Key, w.Revision)})
		case got.value != w.Value || got.modRevision != w.Revision:
			v.Mismatched++
			add(Violation{Kind: KindMismatch, Key: w.Key, Seq: w.Seq, Revision: w.Revision, GotRevision: got.modRevision,
				Detail: fmt.Sprintf("write %d (%s) acknowledged at revision %d is in the store at mod revision %d with value %q (wrote %q)",
					w.Seq, w.Key, w.Revision, got.modRevision, got.value, w.Value)})
		case before:
			v.HeldBefore++
			heldRev = max(heldRev, w.Revision)
			if w.Done.After(v.NewestHeld) {
				v.NewestHeld, v.NewestHeldSeq = w.Done, w.Seq
			}
		default:
			v.HeldAfter++
		}
	}
	for _, w := range lostBefore {
		if w.Revision < heldRev {
			v.Gaps++
			add(Violation{Kind: KindLost, Key: w.Key, Seq: w.Seq, Revision: w.Revision,
				Detail: fmt.Sprintf("write %d (%s) acknowledged at revision %d, below revision %d that the restore kept, is not in the store: a hole before the restored point",
					w.Seq, w.Key, w.Revision, heldRev)})
		}
	}
	v.Summary = v.summary(t0)
	return v
}

func (v *RestoreVerification) summary(t0 time.Time) string {
	var b strings.Builder
	if v.OK() {
		b.WriteString("ok: ")
	} else {
		fmt.Fprintf(&b, "FAILED (%d gaps before the restored point, %d lost after t0, %d mismatched): ", v.Gaps, v.LostAfter, v.Mismatched)
	}
	fmt.Fprintf(&b, "%d of %d writes acknowledged before the disaster kept", v.HeldBefore, v.AckedBefore)
	if v.LostBefore > 0 {
		fmt.Fprintf(&b, ", %d lost (acknowledged %s to %s before t0)", v.LostBefore,
			t0.Sub(v.LostFrom).Round(time.Millisecond), t0.Sub(v.LostTo).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "; %d of %d acknowledged by the restored cluster kept", v.HeldAfter, v.AckedAfter)
	return b.String()
}
