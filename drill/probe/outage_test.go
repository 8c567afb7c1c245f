package probe

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var testT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns the instant ms milliseconds after testT0.
func at(ms float64) time.Time { return testT0.Add(time.Duration(ms * float64(time.Millisecond))) }

// seq builds samples sent every 20 ms from startMs, each done 5 ms later, OK per pattern
// ('+' OK, '-' failed).
func seq(startMs float64, pattern string) []Sample {
	var ss []Sample
	for i, c := range pattern {
		sent := startMs + 20*float64(i)
		s := Sample{Sent: at(sent), Done: at(sent + 5), OK: c == '+', Code: 200}
		if !s.OK {
			s.Code, s.Err = 0, "connection refused"
		}
		ss = append(ss, s)
	}
	return ss
}

func msd(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func TestOutage(t *testing.T) {
	tests := []struct {
		name    string
		samples []Sample
		want    OutageStats
	}{
		{
			name:    "empty",
			samples: nil,
			want:    OutageStats{T0: testT0, NoFailure: true},
		},
		{
			name: "clean failover",
			// sent: -40 -20 | 0 20 40 60 80
			samples: seq(-40, "++---++"),
			want: OutageStats{T0: testT0, Samples: 7, Failed: 3,
				HasOKBefore: true, LastOKBefore: msd(-20),
				FirstFailAfter: 0, Recovered: true, RecoveredAfter: msd(65),
				LastFailAfter: msd(40), Settled: true, SettledAfter: msd(65),
				// Sent of the OK at -20 to Sent of the OK at 60.
				LongestFailRun: msd(80), LongestFailRunSamples: 3, LongestFailRunStart: 0},
		},
		{
			name:    "no failure",
			samples: seq(-40, "+++++"),
			want:    OutageStats{T0: testT0, Samples: 5, HasOKBefore: true, LastOKBefore: msd(-20), NoFailure: true},
		},
		{
			name: "never recovers",
			// sent: -30 -10 | 10 30 50
			samples: seq(-30, "++---"),
			want: OutageStats{T0: testT0, Samples: 5, Failed: 3,
				HasOKBefore: true, LastOKBefore: msd(-10),
				FirstFailAfter: msd(10), LastFailAfter: msd(50),
				// Sent of the OK at -10 to the Sent of the run's last sample (50).
				LongestFailRun: msd(60), LongestFailRunSamples: 3, LongestFailRunStart: msd(10), LongestFailRunOpen: true},
		},
		{
			name: "flapping",
			// sent: -20 | 0 20 40 60 80 100 120
			samples: seq(-20, "+-+---++"),
			want: OutageStats{T0: testT0, Samples: 8, Failed: 4,
				HasOKBefore: true, LastOKBefore: msd(-20),
				FirstFailAfter: 0, Recovered: true, RecoveredAfter: msd(25),
				LastFailAfter: msd(80), Settled: true, SettledAfter: msd(105),
				// The second run: Sent of the OK at 20 to Sent of the OK at 100.
				LongestFailRun: msd(80), LongestFailRunSamples: 3, LongestFailRunStart: msd(40)},
		},
		{
			name: "bad baseline",
			// sent: -40 -20 | 0 20 40
			samples: seq(-40, "--+-+"),
			want: OutageStats{T0: testT0, Samples: 5, Failed: 1, FailedBeforeT0: 2,
				FirstFailAfter: msd(20), Recovered: true, RecoveredAfter: msd(45),
				LastFailAfter: msd(20), Settled: true, SettledAfter: msd(45),
				// No OK before it: from the Sent of its first sample (-40) to the Sent of the OK at 0.
				LongestFailRun: msd(40), LongestFailRunSamples: 2, LongestFailRunStart: msd(-40)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Outage(tt.samples, testT0); got != tt.want {
				t.Errorf("Outage =\n%+v\nwant\n%+v", got, tt.want)
			}
			// Order does not matter.
			shuffled := slices.Clone(tt.samples)
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if got := Outage(shuffled, testT0); got != tt.want {
				t.Errorf("Outage of shuffled samples =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestOutageOverlappingRequests(t *testing.T) {
	// Open loop: a slow request sent before a fast one finishes after it. Recovery is the Done
	// of the first OK sample by Sent, even if a later one finished earlier; the fail run is the
	// gap between the Sent of OK requests.
	samples := []Sample{
		{Sent: at(-20), Done: at(-10), OK: true},
		{Sent: at(0), Done: at(500), Err: "timeout"},
		{Sent: at(20), Done: at(300), OK: true}, // slow: the new holder's first handshake
		{Sent: at(40), Done: at(60), OK: true},
	}
	st := Outage(samples, testT0)
	if !st.Recovered || st.RecoveredAfter != msd(300) || st.SettledAfter != msd(300) || st.LongestFailRun != msd(40) {
		t.Errorf("Outage = %+v", st)
	}
}

func TestOutageJSON(t *testing.T) {
	st := Outage(seq(-40, "++---++"), testT0)
	st.RecoveredAfter += 1234 * time.Nanosecond // rounded to the microsecond
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"t0":"2026-01-02T03:04:05Z"`, `"samples":7`, `"failed":3`, `"failedBeforeT0":0`,
		`"hasOkBefore":true`, `"lastOkBeforeMs":-20`, `"noFailure":false`, `"firstFailAfterMs":0`,
		`"recovered":true`, `"recoveredAfterMs":65.001`, `"lastFailAfterMs":40`, `"settled":true`,
		`"settledAfterMs":65`, `"longestFailRunMs":80`, `"longestFailRunSamples":3`,
		`"longestFailRunStartMs":0`, `"longestFailRunOpen":false`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	var back OutageStats
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	st.RecoveredAfter = st.RecoveredAfter.Round(time.Microsecond)
	if !back.T0.Equal(st.T0) {
		t.Errorf("T0 %v, want %v", back.T0, st.T0)
	}
	back.T0 = st.T0
	if back != st {
		t.Errorf("round trip =\n%+v\nwant\n%+v", back, st)
	}
}
