package workload

import (
	"encoding/json"
	"math"
	"time"
)

// Durations are time.Duration in Go and float milliseconds in JSON. Each type with durations tags
// them `json:"-"` and marshals through a wrapper that embeds the type (under another name, so its
// methods do not recurse) beside the *Ms fields.

func toMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fromMs(ms float64) time.Duration {
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}

type recordJSON struct {
	plainRecord
	RequestTimeoutMs float64 `json:"requestTimeoutMs"`
}

type plainRecord Record

// MarshalJSON encodes r with RequestTimeout as requestTimeoutMs. Times lose their monotonic clock
// reading on the way; durations between them stay exact to the nanosecond.
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(recordJSON{plainRecord(r), toMs(r.RequestTimeout)})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Record(j.plainRecord)
	r.RequestTimeout = fromMs(j.RequestTimeoutMs)
	return nil
}

type plainStats Stats

type statsJSON struct {
	plainStats
	RTOMs        *float64 `json:"rtoMs"` // null when not observed
	ResolutionMs float64  `json:"resolutionMs"`
	LongestGapMs float64  `json:"longestGapMs"`
	GapStartMs   float64  `json:"gapStartMs"`
	GapEndMs     float64  `json:"gapEndMs"`
	LatencyP50Ms float64  `json:"latencyP50Ms"`
	LatencyP99Ms float64  `json:"latencyP99Ms"`
	LatencyMaxMs float64  `json:"latencyMaxMs"`
}

// MarshalJSON encodes s with its durations as float milliseconds (rtoMs, resolutionMs,
// longestGapMs, gapStartMs, gapEndMs, latencyP50Ms, latencyP99Ms, latencyMaxMs); rtoMs is null
// when RTOObserved is false.
func (s Stats) MarshalJSON() ([]byte, error) {
	j := statsJSON{
		plainStats:   plainStats(s),
		ResolutionMs: toMs(s.Resolution),
		LongestGapMs: toMs(s.LongestGap),
		GapStartMs:   toMs(s.GapStart),
		GapEndMs:     toMs(s.GapEnd),
		LatencyP50Ms: toMs(s.LatencyP50),
		LatencyP99Ms: toMs(s.LatencyP99),
		LatencyMaxMs: toMs(s.LatencyMax),
	}
	if s.RTOObserved {
		rto := toMs(s.RTO)
		j.RTOMs = &rto
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes (durations rounded to the nanosecond).
func (s *Stats) UnmarshalJSON(b []byte) error {
	var j statsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Stats(j.plainStats)
	s.RTO = -1
	if j.RTOMs != nil {
		s.RTO = fromMs(*j.RTOMs)
	}
	s.Resolution = fromMs(j.ResolutionMs)
	s.LongestGap = fromMs(j.LongestGapMs)
	s.GapStart = fromMs(j.GapStartMs)
	s.GapEnd = fromMs(j.GapEndMs)
	s.LatencyP50 = fromMs(j.LatencyP50Ms)
	s.LatencyP99 = fromMs(j.LatencyP99Ms)
	s.LatencyMax = fromMs(j.LatencyMaxMs)
	return nil
}
