package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Kind names a violation of etcd's guarantees found by Verify.
type Kind string

// The kinds of violation, in the order Verification lists them.
const (
	// KindLost: an acknowledged write's key is absent (durability).
	KindLost Kind = "lost"
	// KindMismatch: an acknowledged write's key holds another value or ModRevision than
	// acknowledged.
	KindMismatch Kind = "mismatch"
	// KindSplitBrain: two acknowledged writes share a revision; each revision belongs to one
	// modifying operation, so two leaders acknowledged writes for the same log position.
	KindSplitBrain Kind = "split-brain"
	// KindOrder: a write acknowledged before another was sent has a revision at or above the
	// other's (strict serializability: total order consistent with real time).
	KindOrder Kind = "order"
	// KindStaleRead: a linearizable read sent after a write was acknowledged did not return it.
	KindStaleRead Kind = "stale-read"
)

var kinds = []Kind{KindLost, KindMismatch, KindSplitBrain, KindOrder, KindStaleRead}

// MaxListed caps how many violations of each kind, and how many foreign keys, a Verification lists;
// its counts are exact.
const MaxListed = 10

// listPageSize is how many keys Verify reads per request.
const listPageSize = 1000

// Violation is one broken guarantee.
type Violation struct {
	Kind Kind `json:"kind"`
	// Key and Seq are the write concerned (for KindOrder: the later write; for KindSplitBrain: the
	// first of the writes sharing the revision; for KindStaleRead: the key read, Seq 0).
	Key string `json:"key"`
	Seq int64  `json:"seq,omitempty"`
	// Revision is the acknowledged revision of Key (for KindStaleRead: the one the read had to
	// return). GotRevision is the ModRevision found in the store or returned by the read, 0 when
	// the key was absent.
	Revision    int64 `json:"revision,omitempty"`
	GotRevision int64 `json:"gotRevision,omitempty"`
	// OtherKey, OtherSeq and OtherRevision are the other write involved: for KindSplitBrain one
	// sharing the revision, for KindOrder the write acknowledged before Key was sent (the one of
	// highest revision).
	OtherKey      string `json:"otherKey,omitempty"`
	OtherSeq      int64  `json:"otherSeq,omitempty"`
	OtherRevision int64  `json:"otherRevision,omitempty"`
	// Detail says it in a sentence.
	Detail string `json:"detail"`
}

func (v Violation) String() string { return string(v.Kind) + ": " + v.Detail }

// Verification is the outcome of Verify. Counts are exact; Violations and ForeignKeys are capped
// (MaxListed per kind).
type Verification struct {
	Prefix string `json:"prefix"`
	// Revision is the store revision at which the prefix was read (every page at the same one).
	Revision int64 `json:"revision"`
	// Keys is the number of keys found under the prefix.
	Keys int `json:"keys"`

	// Writes and Acked are the record's Puts and acknowledged Puts. Intact counts acknowledged
	// writes found with their value and acknowledged revision; Lost those absent; Mismatched those
	// present with another value or ModRevision.
	Writes     int `json:"writes"`
	Acked      int `json:"acked"`
	Intact     int `json:"intact"`
	Lost       int `json:"lost"`
	Mismatched int `json:"mismatched"`
	// SplitBrain is the number of revisions acknowledged to more than one write.
	SplitBrain int `json:"splitBrain"`
	// OrderViolations is the number of writes (acknowledged, or committed without ack) whose
	// revision is not above that of every write acknowledged before they were sent.
	OrderViolations int `json:"orderViolations"`
	// Reads and StaleReads are the record's reads and those that were stale (Read.Stale).
	Reads      int `json:"reads"`
	StaleReads int `json:"staleReads"`

	// Informational, not failures: CommittedUnacked counts unacknowledged writes (timed out or
	// failed) found in the store with their value: etcd applied them but the answer was lost or
	// late, which its guarantees allow. UnackedAbsent counts unacknowledged writes not found.
	// Foreign counts keys under the prefix that no write of the record explains.
	CommittedUnacked int `json:"committedUnacked"`
	UnackedAbsent    int `json:"unackedAbsent"`
	Foreign          int `json:"foreign"`

	Violations  []Violation `json:"violations,omitempty"`
	ForeignKeys []string    `json:"foreignKeys,omitempty"`

	// Summary is one line for people, set by Verify from the fields above, e.g. "ok: all 2950
	// acknowledged writes present at their revisions; no split brain; no real-time order
	// violation; 0 stale of 30 reads; 12 writes not acknowledged (3 committed anyway)", or
	// "FAILED: 1 lost and 0 mismatched of 2950 acknowledged writes; ...".
	Summary string `json:"summary"`
}

// OK reports whether no guarantee was broken: nothing lost or mismatched, no split brain, no order
// violation, no stale read.
func (v *Verification) OK() bool {
	return v.Lost == 0 && v.Mismatched == 0 && v.SplitBrain == 0 && v.OrderViolations == 0 && v.StaleReads == 0
}

// summary returns the Summary line of v's counts.
func (v *Verification) summary() string {
	var b strings.Builder
	if v.OK() {
		fmt.Fprintf(&b, "ok: all %d acknowledged writes present at their revisions; no split brain; no real-time order violation; 0 stale of %d reads",
			v.Acked, v.Reads)
	} else {
		fmt.Fprintf(&b, "FAILED: %d lost and %d mismatched of %d acknowledged writes; %d split-brain revisions; %d real-time order violations; %d stale of %d reads",
			v.Lost, v.Mismatched, v.Acked, v.SplitBrain, v.OrderViolations, v.StaleReads, v.Reads)
	}
	if un := v.Writes - v.Acked; un > 0 {
		fmt.Fprintf(&b, "; %d writes not acknowledged (%d committed anyway)", un, v.CommittedUnacked)
	}
	if v.Foreign > 0 {
		fmt.Fprintf(&b, "; %d keys under %s not written by this run", v.Foreign, v.Prefix)
	}
	return b.String()
}

type plainVerification Verification

// MarshalJSON encodes v with one more field, "ok": OK().
func (v Verification) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		OK bool `json:"ok"`
		plainVerification
	}{v.OK(), plainVerification(v)})
}

// UnmarshalJSON decodes what MarshalJSON encodes ("ok" is derived, so dropped).
func (v *Verification) UnmarshalJSON(b []byte) error {
	return json.Unmarshal(b, (*plainVerification)(v))
}

// storedKV is a key's state in the store.
type storedKV struct {
	value       string
	modRevision int64
}

// Verify reads back everything under r.Prefix (linearizable; paginated, every page at the first
// page's revision so the listing is one snapshot, which works for any number of keys until that
// revision is compacted) and checks r against it and against itself:
//   - every acknowledged write is present with its value and ModRevision == its acknowledged
//     revision (else KindLost or KindMismatch);
//   - no two acknowledged writes share a revision (else KindSplitBrain);
//   - real-time order: if write A was acknowledged before write B was sent, A's revision is
//     below B's (else KindOrder); B ranges over acknowledged writes and unacknowledged ones
//     found committed (their ModRevision);
//   - no read of the record is stale (KindStaleRead).
//
// The rules are etcd's API guarantees (durability, strict serializability:
// https://etcd.io/docs/v3.6/learning/api_guarantees/). The error is non-nil only when the listing
// fails (wrapped, %w) or the arguments are unusable (ErrInvalidConfig).
func Verify(ctx context.Context, cli *clientv3.Client, r *Record) (*Verification, error) {
	if cli == nil || r == nil {
		return nil, fmt.Errorf("%w: verify needs a client and a record", ErrInvalidConfig)
	}
	if err := ValidatePrefix(r.Prefix); err != nil {
		return nil, err
	}
	store, rev, err := list(ctx, cli, r.Prefix, listPageSize)
	if err != nil {
		return nil, err
	}
	return check(r, store, rev), nil
}

// list returns every key under prefix with its value and ModRevision, read pageSize keys at a time
// at one revision, and that revision.
func list(ctx context.Context, cli *clientv3.Client, prefix string, pageSize int64) (map[string]storedKV, int64, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	store := map[string]storedKV{}
	var rev int64
	for from := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("verify: read %s from %q: %w", prefix, from, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			store[string(kv.Key)] = storedKV{value: string(kv.Value), modRevision: kv.ModRevision}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return store, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// check is Verify without I/O: r against store, the prefix's content at revision rev.
func check(r *Record, store map[string]storedKV, rev int64) *Verification {
	c := &checker{v: &Verification{Prefix: r.Prefix, Revision: rev, Keys: len(store), Writes: len(r.Writes), Reads: len(r.Reads)}, listed: map[Kind]int{}}
	all := c.presence(r, store)
	c.splitBrain(r)
	c.order(r, all)
	c.staleReads(r)
	v := c.v
	slices.SortStableFunc(v.Violations, func(a, b Violation) int {
		return slices.Index(kinds, a.Kind) - slices.Index(kinds, b.Kind)
	})
	v.Summary = v.summary()
	return v
}

// checker is check's state: the verification being filled and how many violations of each kind it
// lists so far.
type checker struct {
	v      *Verification
	listed map[Kind]int
}

// add lists x unless MaxListed of its kind are listed already.
func (c *checker) add(x Violation) {
	if c.listed[x.Kind] < MaxListed {
		c.listed[x.Kind]++
		c.v.Violations = append(c.v.Violations, x)
	}
}

// committed is a write known to be committed, with its revision.
type committed struct {
	w   Write
	rev int64
}

// presence counts what became of each write and the store's keys no write accounts for (foreign).
// It returns the writes known to be committed, with their revision: acknowledged ones, and
// unacknowledged ones found in the store. A mismatched acknowledged key is reported as such, not
// as foreign.
func (c *checker) presence(r *Record, store map[string]storedKV) []committed {
	v := c.v
	explained := map[string]bool{}
	var all []committed
	for _, w := range r.Writes {
		got, found := store[w.Key]
		intact := found && got.value == w.Value
		if intact || (found && w.Acked) {
			explained[w.Key] = true
		}
		if !w.Acked {
			switch {
			case intact:
				v.CommittedUnacked++
				all = append(all, committed{w, got.modRevision})
			case !found:
				v.UnackedAbsent++
			}
			continue
		}
		v.Acked++
		all = append(all, committed{w, w.Revision})
		switch {
		case !found:
			v.Lost++
			c.add(Violation{Kind: KindLost, Key: w.Key, Seq: w.Seq, Revision: w.Revision,
				Detail: fmt.Sprintf("write %d (%s) acknowledged at revision %d is not in the store", w.Seq, w.Key, w.Revision)})
		case !intact || got.modRevision != w.Revision:
			v.Mismatched++
			c.add(Violation{Kind: KindMismatch, Key: w.Key, Seq: w.Seq, Revision: w.Revision, GotRevision: got.modRevision,
				Detail: fmt.Sprintf("write %d (%s) acknowledged at revision %d is in the store at mod revision %d with value %q (wrote %q)",
					w.Seq, w.Key, w.Revision, got.modRevision, got.value, w.Value)})
		default:
			v.Intact++
		}
	}
	var foreign []string
	for k := range store {
		if !explained[k] {
			foreign = append(foreign, k)
		}
	}
	slices.Sort(foreign)
	v.Foreign = len(foreign)
	v.ForeignKeys = foreign[:min(len(foreign), MaxListed)]
	return all
}

// splitBrain reports each revision acknowledged to several writes.
func (c *checker) splitBrain(r *Record) {
	byRev := map[int64][]Write{}
	for _, w := range r.Writes {
		if w.Acked {
			byRev[w.Revision] = append(byRev[w.Revision], w)
		}
	}
	revs := make([]int64, 0, len(byRev))
	for rv, ws := range byRev {
		if len(ws) > 1 {
			revs = append(revs, rv)
		}
	}
	slices.Sort(revs)
	c.v.SplitBrain = len(revs)
	for _, rv := range revs {
		ws := byRev[rv]
		keys := make([]string, len(ws))
		for i, w := range ws {
			keys[i] = w.Key
		}
		c.add(Violation{Kind: KindSplitBrain, Key: ws[0].Key, Seq: ws[0].Seq, Revision: rv,
			OtherKey: ws[1].Key, OtherSeq: ws[1].Seq, OtherRevision: rv,
			Detail: fmt.Sprintf("revision %d acknowledged to %d writes: %s", rv, len(ws), strings.Join(keys, ", "))})
	}
}

// order checks real-time order: it sweeps the committed writes B (all, sorted here) by Sent,
// keeping the highest revision among acknowledged writes A with A.Done < B.Sent, and reports each
// B committed at or below it.
func (c *checker) order(r *Record, all []committed) {
	acked := make([]Write, 0, c.v.Acked)
	for _, w := range r.Writes {
		if w.Acked {
			acked = append(acked, w)
		}
	}
	slices.SortFunc(acked, func(a, b Write) int { return a.Done.Compare(b.Done) })
	slices.SortFunc(all, func(a, b committed) int { return a.w.Sent.Compare(b.w.Sent) })
	var (
		j    int
		high *Write
	)
	for _, b := range all {
		for ; j < len(acked) && acked[j].Done.Before(b.w.Sent); j++ {
			if high == nil || acked[j].Revision > high.Revision {
				high = &acked[j]
			}
		}
		if high != nil && high.Revision >= b.rev {
			c.v.OrderViolations++
			how := "acknowledged"
			if !b.w.Acked {
				how = "committed (unacknowledged)"
			}
			c.add(Violation{Kind: KindOrder, Key: b.w.Key, Seq: b.w.Seq, Revision: b.rev,
				OtherKey: high.Key, OtherSeq: high.Seq, OtherRevision: high.Revision,
				Detail: fmt.Sprintf("write %d (%s) %s at revision %d, yet write %d (%s) was acknowledged at revision %d before it was sent",
					b.w.Seq, b.w.Key, how, b.rev, high.Seq, high.Key, high.Revision)})
		}
	}
}

// staleReads reports each linearizable read that missed a write acknowledged before it was sent.
func (c *checker) staleReads(r *Record) {
	for _, rd := range r.Reads {
		if !rd.Stale() {
			continue
		}
		c.v.StaleReads++
		got := "did not find it"
		if rd.Found {
			got = fmt.Sprintf("returned mod revision %d", rd.GotModRevision)
		}
		c.add(Violation{Kind: KindStaleRead, Key: rd.Key, Revision: rd.WantRevision, GotRevision: rd.GotModRevision,
			Detail: fmt.Sprintf("linearizable read of %s sent after its write was acknowledged at revision %d %s", rd.Key, rd.WantRevision, got)})
	}
}

// Cleanup deletes every key under prefix (validated with ValidatePrefix, so never "/" or "")
// in one request and returns how many were deleted. Errors wrap the client's (%w).
func Cleanup(ctx context.Context, cli *clientv3.Client, prefix string) (deleted int64, err error) {
	if cli == nil {
		return 0, fmt.Errorf("%w: cleanup needs a client", ErrInvalidConfig)
	}
	if err := ValidatePrefix(prefix); err != nil {
		return 0, err
	}
	resp, err := cli.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("workload: delete %s: %w", prefix, err)
	}
	return resp.Deleted, nil
}
