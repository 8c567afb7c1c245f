package workload

import (
	"slices"
	"time"

	"github.com/hactl/hactl/internal/percentile"
)

// Stats are availability figures computed from a Record. Every duration is a time.Duration in Go
// and a float number of milliseconds in JSON (the field name ending in Ms). Offsets are relative to
// T0 and negative before it.
type Stats struct {
	// T0 is the reference instant (the fault injection), Record.Started when Stats was given a zero
	// time.
	T0 time.Time `json:"t0"`
	// Sent is the number of Puts issued, Acked of those acknowledged, Failed of those not
	// (Sent = Acked + Failed). Skipped counts write ticks at which no Put was issued because the
	// in-flight bound was reached.
	Sent    int `json:"sent"`
	Acked   int `json:"acked"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// AckRatio is Acked / (Sent + Skipped), 0 when nothing was due: the share of scheduled writes
	// that succeeded.
	AckRatio float64 `json:"ackRatio"`

	// RTOObserved is true when a Put sent at or after T0 was acknowledged. RTO (recovery time) is
	// then the time from T0 to the earliest acknowledgement among Puts sent at or after T0; it is
	// -1ns (null in JSON) when not recovered. RTO ends at an acknowledgement, so it includes that
	// Put's latency, and its resolution is one tick, Resolution = 1/Rate (20 ms at the default
	// rate): service may have come back up to one tick before the Put that found it was sent.
	RTOObserved bool          `json:"rtoObserved"`
	RTO         time.Duration `json:"-"`
	Resolution  time.Duration `json:"-"`

	// LongestGap is the longest interval between consecutive acknowledgements (acked Puts sorted
	// by Done), from GapStart to GapEnd (offsets from T0); all 0 with fewer than two acks. An
	// outage that never ended (no ack after it) is not a gap: see RTOObserved.
	LongestGap time.Duration `json:"-"`
	GapStart   time.Duration `json:"-"`
	GapEnd     time.Duration `json:"-"`

	// LatencyP50, LatencyP99 and LatencyMax are percentiles of Done-Sent over acknowledged Puts
	// (nearest rank: the ⌈p·n/100⌉-th smallest); 0 when none.
	LatencyP50 time.Duration `json:"-"`
	LatencyP99 time.Duration `json:"-"`
	LatencyMax time.Duration `json:"-"`

	// ReadsOK counts reads that returned the acknowledged write, ReadsFailed reads that failed
	// (error or deadline), ReadsStale reads that succeeded without returning it (Read.Stale: a
	// linearizability violation), ReadsSkipped read ticks lost to the in-flight bound.
	ReadsOK      int `json:"readsOK"`
	ReadsFailed  int `json:"readsFailed"`
	ReadsStale   int `json:"readsStale"`
	ReadsSkipped int `json:"readsSkipped"`
}

// Stats computes the figures of r with t0 as the reference instant (a zero t0 means r.Started). It
// does no I/O. For figures over part of the run, call it on r.Window(from, to).
func (r *Record) Stats(t0 time.Time) Stats {
	if t0.IsZero() {
		t0 = r.Started
	}
	s := Stats{T0: t0, Sent: len(r.Writes), Skipped: len(r.SkippedWrites), ReadsSkipped: len(r.SkippedReads), RTO: -1}
	if r.Rate > 0 {
		s.Resolution = time.Second / time.Duration(r.Rate)
	}
	var acked []Write
	for _, w := range r.Writes {
		if !w.Acked {
			continue
		}
		acked = append(acked, w)
		if !w.Sent.Before(t0) {
			if d := w.Done.Sub(t0); !s.RTOObserved || d < s.RTO {
				s.RTO = d
			}
			s.RTOObserved = true
		}
	}
	s.Acked = len(acked)
	s.Failed = s.Sent - s.Acked
	if due := s.Sent + s.Skipped; due > 0 {
		s.AckRatio = float64(s.Acked) / float64(due)
	}

	slices.SortFunc(acked, func(a, b Write) int { return a.Done.Compare(b.Done) })
	for i := 1; i < len(acked); i++ {
		if gap := acked[i].Done.Sub(acked[i-1].Done); gap > s.LongestGap {
			s.LongestGap = gap
			s.GapStart = acked[i-1].Done.Sub(t0)
			s.GapEnd = acked[i].Done.Sub(t0)
		}
	}

	lat := make([]time.Duration, 0, len(acked))
	for _, w := range acked {
		lat = append(lat, w.Done.Sub(w.Sent))
	}
	slices.Sort(lat)
	s.LatencyP50 = percentile.NearestRank(lat, 50)
	s.LatencyP99 = percentile.NearestRank(lat, 99)
	if len(lat) > 0 {
		s.LatencyMax = lat[len(lat)-1]
	}

	for _, rd := range r.Reads {
		switch {
		case rd.Err != "":
			s.ReadsFailed++
		case rd.Stale():
			s.ReadsStale++
		default:
			s.ReadsOK++
		}
	}
	return s
}

// Window returns a copy of r holding only the writes, reads and skipped ticks sent (or scheduled)
// in [from, to]; a zero from or to leaves that side open. Started and Stopped are narrowed to the
// window. Stats on it give the figures of that window only, e.g. the drill's fault window; note
// that acknowledgements of writes sent before from are then ignored by LongestGap.
func (r *Record) Window(from, to time.Time) *Record {
	in := func(t time.Time) bool {
		return (from.IsZero() || !t.Before(from)) && (to.IsZero() || !t.After(to))
	}
	w := *r
	w.Writes, w.Reads, w.SkippedWrites, w.SkippedReads = nil, nil, nil, nil
	for _, x := range r.Writes {
		if in(x.Sent) {
			w.Writes = append(w.Writes, x)
		}
	}
	for _, x := range r.Reads {
		if in(x.Sent) {
			w.Reads = append(w.Reads, x)
		}
	}
	for _, x := range r.SkippedWrites {
		if in(x) {
			w.SkippedWrites = append(w.SkippedWrites, x)
		}
	}
	for _, x := range r.SkippedReads {
		if in(x) {
			w.SkippedReads = append(w.SkippedReads, x)
		}
	}
	if !from.IsZero() && from.After(w.Started) {
		w.Started = from
	}
	if !to.IsZero() && to.Before(w.Stopped) {
		w.Stopped = to
	}
	return &w
}
