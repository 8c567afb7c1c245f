package workload

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var base = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// at is base + ms milliseconds.
func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func acked(seq int64, sent, done int, rev int64) Write {
	return Write{Seq: seq, Key: key(seq), Value: value(seq), Sent: at(sent), Done: at(done), Acked: true, Revision: rev}
}

func failed(seq int64, sent, done int) Write {
	return Write{Seq: seq, Key: key(seq), Value: value(seq), Sent: at(sent), Done: at(done), Err: "context deadline exceeded"}
}

func key(seq int64) string {
	return fmt.Sprintf("/hactl-drill/t/%010d", seq)
}

func value(seq int64) string { return "v" + key(seq) }

// fabricated: a kill at 100 ms, writes failing until an ack at 1025 ms.
func fabricated() *Record {
	return &Record{
		Prefix: "/hactl-drill/t/", Rate: 50, ReadRate: 10, RequestTimeout: ms(100),
		Started: at(0), Stopped: at(1100),
		Writes: []Write{
			acked(1, 0, 10, 10),      // latency 10
			acked(2, 20, 35, 11),     // 15
			acked(3, 40, 60, 12),     // 20
			failed(4, 100, 200),      //
			failed(5, 120, 220),      //
			acked(6, 1000, 1030, 14), // 30
			acked(7, 1020, 1025, 15), // 5: the first ack after the kill
			acked(8, 1040, 1090, 16), // 50
		},
		SkippedWrites: []time.Time{at(110)},
		SkippedReads:  []time.Time{at(150), at(250)},
		Reads: []Read{
			{Key: key(1), WantRevision: 10, Sent: at(15), Done: at(18), Found: true, GotModRevision: 10},
			{Key: key(3), WantRevision: 12, Sent: at(120), Done: at(220), Err: "context deadline exceeded"},
			{Key: key(6), WantRevision: 14, Sent: at(1040), Done: at(1045), Found: false},
			{Key: key(6), WantRevision: 14, Sent: at(1050), Done: at(1055), Found: true, GotModRevision: 13},
		},
	}
}

func TestStats(t *testing.T) {
	r := fabricated()
	got := r.Stats(at(100))
	want := Stats{
		T0: at(100), Sent: 8, Acked: 6, Failed: 2, Skipped: 1, AckRatio: 6.0 / 9,
		RTOObserved: true, RTO: ms(925), Resolution: ms(20),
		LongestGap: ms(965), GapStart: ms(-40), GapEnd: ms(925),
		// latencies sorted: 5 10 15 20 30 50; nearest rank p50 = 3rd, p99 = 6th
		LatencyP50: ms(15), LatencyP99: ms(50), LatencyMax: ms(50),
		ReadsOK: 1, ReadsFailed: 1, ReadsStale: 2, ReadsSkipped: 2,
	}
	if got != want {
		t.Errorf("Stats(kill)\n got %+v\nwant %+v", got, want)
	}

	// The kill window only: the writes sent before the kill are left out.
	got = r.Window(at(100), at(2000)).Stats(at(100))
	want = Stats{
		T0: at(100), Sent: 5, Acked: 3, Failed: 2, Skipped: 1, AckRatio: 3.0 / 6,
		RTOObserved: true, RTO: ms(925), Resolution: ms(20),
		LongestGap: ms(60), GapStart: ms(930), GapEnd: ms(990),
		LatencyP50: ms(30), LatencyP99: ms(50), LatencyMax: ms(50),
		ReadsOK: 0, ReadsFailed: 1, ReadsStale: 2, ReadsSkipped: 2,
	}
	if got != want {
		t.Errorf("Window(kill, end).Stats(kill)\n got %+v\nwant %+v", got, want)
	}
	if w := r.Window(at(100), at(2000)); !w.Started.Equal(at(100)) || !w.Stopped.Equal(at(1100)) || len(r.Writes) != 8 {
		t.Errorf("Window bounds %s..%s, or it changed the record", w.Started, w.Stopped)
	}

	// No write sent after t0 was acknowledged: not recovered.
	got = r.Stats(at(1100))
	if got.RTOObserved || got.RTO != -1 {
		t.Errorf("Stats(after the last write): recovered %v RTO %s", got.RTOObserved, got.RTO)
	}
	// A zero t0 is Started.
	if got := r.Stats(time.Time{}); !got.T0.Equal(at(0)) || got.RTO != ms(10) || got.GapStart != ms(60) {
		t.Errorf("Stats(zero): T0 %s RTO %s gap start %s", got.T0, got.RTO, got.GapStart)
	}
	// Nothing at all.
	empty := (&Record{}).Stats(at(0))
	if empty != (Stats{T0: at(0), RTO: -1}) {
		t.Errorf("empty record: %+v", empty)
	}
}

func TestStatsJSON(t *testing.T) {
	s := fabricated().Stats(at(100))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"rtoMs": 925.0, "resolutionMs": 20.0, "longestGapMs": 965.0, "gapStartMs": -40.0, "gapEndMs": 925.0,
		"latencyP50Ms": 15.0, "latencyP99Ms": 50.0, "latencyMaxMs": 50.0,
		"sent": 8.0, "acked": 6.0, "failed": 2.0, "skipped": 1.0, "rtoObserved": true, "readsStale": 2.0,
	} {
		if m[k] != want {
			t.Errorf("JSON %s = %v, want %v", k, m[k], want)
		}
	}
	keys := slices.Sorted(maps.Keys(m))
	wantKeys := []string{"ackRatio", "acked", "failed", "gapEndMs", "gapStartMs", "latencyMaxMs", "latencyP50Ms", "latencyP99Ms",
		"longestGapMs", "readsFailed", "readsOK", "readsSkipped", "readsStale", "resolutionMs", "rtoMs", "rtoObserved", "sent", "skipped", "t0"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("JSON fields %v, want %v", keys, wantKeys)
	}
	var back Stats
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.T0.Equal(s.T0) {
		t.Errorf("T0 round trip: %s", back.T0)
	}
	back.T0 = s.T0
	if back != s {
		t.Errorf("round trip\n got %+v\nwant %+v", back, s)
	}

	s = fabricated().Stats(at(5000))
	b, err = json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"rtoMs":null`) || !strings.Contains(string(b), `"rtoObserved":false`) {
		t.Errorf("not recovered: %s", b)
	}
	if err := json.Unmarshal(b, &back); err != nil || back.RTO != -1 {
		t.Errorf("not recovered round trip: RTO %s, %v", back.RTO, err)
	}
}

func TestRecordJSON(t *testing.T) {
	r := fabricated()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"requestTimeoutMs":100`) || !strings.Contains(string(b), `"revision":16`) {
		t.Errorf("record JSON: %s", b)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.RequestTimeout != ms(100) || len(back.Writes) != 8 || !reflect.DeepEqual(back.Stats(at(100)), r.Stats(at(100))) {
		t.Errorf("round trip: %+v", back)
	}
}
