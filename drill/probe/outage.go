package probe

import (
	"encoding/json"
	"math"
	"time"
)

// OutageStats is what clients of the VIP saw around the fault injected at T0, computed by
// [Outage]. Offsets are durations relative to T0 (negative before it); samples are taken in
// the order they were sent, and "before/after T0" is about when a sample was sent. Encoded as
// JSON, durations are milliseconds (float, microsecond precision) in fields ending in Ms.
type OutageStats struct {
	// T0 is the instant of the fault (e.g. just before `systemctl stop haproxy` was sent).
	T0 time.Time
	// Samples is the number of samples; Failed those sent at or after T0 that are not OK,
	// FailedBeforeT0 those sent before it (non-zero means the baseline was not clean).
	Samples, Failed, FailedBeforeT0 int

	// HasOKBefore reports an OK sample sent before T0; LastOKBefore is its offset (Sent-T0,
	// ≤ 0), zero without one.
	HasOKBefore  bool
	LastOKBefore time.Duration

	// NoFailure reports that no sample sent at or after T0 failed: the clients saw no outage
	// (or the probe was too coarse to see it), and FirstFailAfter and RecoveredAfter are zero.
	NoFailure bool
	// FirstFailAfter is the offset (Sent-T0) of the first failed sample sent at or after T0.
	FirstFailAfter time.Duration
	// Recovered reports an OK sample sent after that first failure. RecoveredAfter is the time
	// from T0 until that sample's Done: the outage as a client sees it. Zero when !Recovered.
	Recovered      bool
	RecoveredAfter time.Duration
	// LastFailAfter is the offset (Sent-T0) of the last failed sample sent at or after T0.
	// Settled reports an OK sample after it (the samples do not end on a failure), and
	// SettledAfter is the time from T0 until that sample's Done. SettledAfter > RecoveredAfter
	// means the service flapped after its first recovery. Zero when NoFailure / !Settled.
	LastFailAfter time.Duration
	Settled       bool
	SettledAfter  time.Duration

	// LongestFailRun is the longest run of consecutive failed samples (anywhere, T0 or not),
	// measured from the Sent of the OK sample before it to the Sent of the OK sample after it:
	// the longest gap between OK requests. Without an OK sample before it, it starts at its
	// first sample's Sent; without one after it (LongestFailRunOpen), it ends at its last
	// sample's Sent. Sent times are used because, with overlapping requests, a later request
	// may finish first. LongestFailRunSamples is the number of samples in the run and
	// LongestFailRunStart the offset (Sent-T0) of its first one. All zero when no sample failed.
	LongestFailRun        time.Duration
	LongestFailRunSamples int
	LongestFailRunStart   time.Duration
	LongestFailRunOpen    bool
}

// Outage computes the [OutageStats] of samples (in any order; [ReadyzRun.Stop] returns them
// ordered) around the fault injected at t0. All time differences use the monotonic clock
// readings of the samples and t0 when they have them (times from time.Now do).
func Outage(samples []Sample, t0 time.Time) OutageStats {
	ss := sortedSamples(samples)
	st := OutageStats{T0: t0, Samples: len(ss)}
	firstFail, lastFail := -1, -1
	for i, s := range ss {
		before := s.Sent.Before(t0)
		switch {
		case before && s.OK:
			st.HasOKBefore, st.LastOKBefore = true, s.Sent.Sub(t0)
		case before:
			st.FailedBeforeT0++
		case !s.OK:
			st.Failed++
			lastFail = i
			st.LastFailAfter = s.Sent.Sub(t0)
			if firstFail < 0 {
				firstFail = i
				st.FirstFailAfter = s.Sent.Sub(t0)
			}
		case firstFail >= 0 && !st.Recovered:
			st.Recovered, st.RecoveredAfter = true, s.Done.Sub(t0)
		}
	}
	st.NoFailure = firstFail < 0
	if lastFail >= 0 && lastFail+1 < len(ss) {
		st.Settled, st.SettledAfter = true, ss[lastFail+1].Done.Sub(t0)
	}

	for i := 0; i < len(ss); {
		if ss[i].OK {
			i++
			continue
		}
		j := i // ss[i:j] is the run
		for j < len(ss) && !ss[j].OK {
			j++
		}
		from, to := ss[i].Sent, ss[j-1].Sent
		if i > 0 {
			from = ss[i-1].Sent
		}
		open := j == len(ss)
		if !open {
			to = ss[j].Sent
		}
		if d := to.Sub(from); st.LongestFailRunSamples == 0 || d > st.LongestFailRun {
			st.LongestFailRun, st.LongestFailRunSamples = d, j-i
			st.LongestFailRunStart, st.LongestFailRunOpen = ss[i].Sent.Sub(t0), open
		}
		i = j
	}
	return st
}

// outageJSON is OutageStats on the wire.
type outageJSON struct {
	T0                    time.Time `json:"t0"`
	Samples               int       `json:"samples"`
	Failed                int       `json:"failed"`
	FailedBeforeT0        int       `json:"failedBeforeT0"`
	HasOKBefore           bool      `json:"hasOkBefore"`
	LastOKBeforeMs        float64   `json:"lastOkBeforeMs"`
	NoFailure             bool      `json:"noFailure"`
	FirstFailAfterMs      float64   `json:"firstFailAfterMs"`
	Recovered             bool      `json:"recovered"`
	RecoveredAfterMs      float64   `json:"recoveredAfterMs"`
	LastFailAfterMs       float64   `json:"lastFailAfterMs"`
	Settled               bool      `json:"settled"`
	SettledAfterMs        float64   `json:"settledAfterMs"`
	LongestFailRunMs      float64   `json:"longestFailRunMs"`
	LongestFailRunSamples int       `json:"longestFailRunSamples"`
	LongestFailRunStartMs float64   `json:"longestFailRunStartMs"`
	LongestFailRunOpen    bool      `json:"longestFailRunOpen"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func fromMs(f float64) time.Duration { return time.Duration(math.Round(f * 1e6)) }

// MarshalJSON encodes the durations as milliseconds (fields ending in Ms).
func (s OutageStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(outageJSON{
		T0: s.T0, Samples: s.Samples, Failed: s.Failed, FailedBeforeT0: s.FailedBeforeT0,
		HasOKBefore: s.HasOKBefore, LastOKBeforeMs: ms(s.LastOKBefore),
		NoFailure: s.NoFailure, FirstFailAfterMs: ms(s.FirstFailAfter),
		Recovered: s.Recovered, RecoveredAfterMs: ms(s.RecoveredAfter),
		LastFailAfterMs: ms(s.LastFailAfter), Settled: s.Settled, SettledAfterMs: ms(s.SettledAfter),
		LongestFailRunMs: ms(s.LongestFailRun), LongestFailRunSamples: s.LongestFailRunSamples,
		LongestFailRunStartMs: ms(s.LongestFailRunStart), LongestFailRunOpen: s.LongestFailRunOpen,
	})
}

// UnmarshalJSON decodes what MarshalJSON encodes (durations to the microsecond).
func (s *OutageStats) UnmarshalJSON(b []byte) error {
	var j outageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = OutageStats{
		T0: j.T0, Samples: j.Samples, Failed: j.Failed, FailedBeforeT0: j.FailedBeforeT0,
		HasOKBefore: j.HasOKBefore, LastOKBefore: fromMs(j.LastOKBeforeMs),
		NoFailure: j.NoFailure, FirstFailAfter: fromMs(j.FirstFailAfterMs),
		Recovered: j.Recovered, RecoveredAfter: fromMs(j.RecoveredAfterMs),
		LastFailAfter: fromMs(j.LastFailAfterMs), Settled: j.Settled, SettledAfter: fromMs(j.SettledAfterMs),
		LongestFailRun: fromMs(j.LongestFailRunMs), LongestFailRunSamples: j.LongestFailRunSamples,
		LongestFailRunStart: fromMs(j.LongestFailRunStartMs), LongestFailRunOpen: j.LongestFailRunOpen,
	}
	return nil
}
