package workload

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// restoreRecord: writes 1-10 acknowledged 100 ms apart before t0 (at 1.0 s), write 11 failed during
// the outage, writes 12-13 acknowledged by the restored cluster (revisions past the bump).
func restoreRecord() (*Record, time.Time) {
	base := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	r := &Record{Prefix: "/hactl-drill/r/"}
	for i := int64(1); i <= 13; i++ {
		w := Write{Seq: i, Key: fmt.Sprintf("/hactl-drill/r/%010d", i), Value: fmt.Sprintf("v%d", i),
			Sent: base.Add(time.Duration(i)*100*time.Millisecond - 5*time.Millisecond), Done: base.Add(time.Duration(i) * 100 * time.Millisecond),
			Acked: i != 11, Revision: 100 + i}
		if i >= 12 {
			w.Revision = 1_000_000_200 + i
			w.Done = base.Add(30 * time.Second)
		}
		r.Writes = append(r.Writes, w)
	}
	return r, base.Add(1050 * time.Millisecond)
}

func TestCheckRestore(t *testing.T) {
	r, t0 := restoreRecord()
	// The snapshot holds writes 1-6; 7-10 are after it; 12 and 13 were written after the restore.
	store := map[string]storedKV{}
	for _, i := range []int{0, 1, 2, 3, 4, 5, 11, 12} {
		w := r.Writes[i]
		store[w.Key] = storedKV{value: w.Value, modRevision: w.Revision}
	}
	v := checkRestore(r, store, 1_000_000_300, t0)
	if !v.OK() || v.AckedBefore != 10 || v.HeldBefore != 6 || v.LostBefore != 4 || v.AckedAfter != 2 || v.HeldAfter != 2 || v.NewestHeldSeq != 6 {
		t.Fatalf("restore kept 1-6 and 12-13: %+v", v)
	}
	if got, want := t0.Sub(v.NewestHeld), 450*time.Millisecond; got != want {
		t.Errorf("t0 - newest held = %s, want %s (the RPO)", got, want)
	}
	if t0.Sub(v.LostFrom) != 350*time.Millisecond || t0.Sub(v.LostTo) != 50*time.Millisecond {
		t.Errorf("lost window %s..%s before t0, want 350ms..50ms", t0.Sub(v.LostFrom), t0.Sub(v.LostTo))
	}
	if !strings.HasPrefix(v.Summary, "ok: 6 of 10 writes acknowledged before the disaster kept, 4 lost (acknowledged 350ms to 50ms before t0); 2 of 2") {
		t.Errorf("summary: %s", v.Summary)
	}

	// A hole before the restored point, a write of the restored cluster lost, one changed.
	delete(store, r.Writes[2].Key)
	delete(store, r.Writes[12].Key)
	store[r.Writes[0].Key] = storedKV{value: "other", modRevision: r.Writes[0].Revision}
	v = checkRestore(r, store, 1_000_000_300, t0)
	if v.OK() || v.Gaps != 1 || v.LostAfter != 1 || v.Mismatched != 1 || len(v.Violations) != 3 {
		t.Fatalf("hole, lost after t0, mismatch: %+v", v)
	}
	if !strings.HasPrefix(v.Summary, "FAILED (1 gaps before the restored point, 1 lost after t0, 1 mismatched)") {
		t.Errorf("summary: %s", v.Summary)
	}

	// Nothing held from before the disaster: no newest held write, no gap.
	v = checkRestore(r, map[string]storedKV{}, 5, t0)
	if !v.NewestHeld.IsZero() || v.Gaps != 0 || v.LostBefore != 10 || v.LostAfter != 2 {
		t.Errorf("empty store: %+v", v)
	}
}
