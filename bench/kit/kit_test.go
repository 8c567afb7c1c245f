package kit

import (
	"math"
	"testing"
)

func TestPct(t *testing.T) {
	ten := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	for _, tc := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{ten, 50, 5}, {ten, 90, 9}, {ten, 100, 10}, {ten, 0, 1}, {ten, 10, 1}, {ten, 11, 2},
		{[]float64{3}, 50, 3}, {[]float64{2, 1}, 50, 1}, {[]float64{2, 1}, 51, 2},
	} {
		if got := Pct(tc.xs, tc.p); got != tc.want {
			t.Errorf("Pct(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
	if ten[0] != 10 {
		t.Errorf("Pct sorted its input: %v", ten)
	}
	if got := Pct(nil, 50); !math.IsNaN(got) {
		t.Errorf("Pct(nil) = %v, want NaN", got)
	}
}

func TestVerdict(t *testing.T) {
	if Verdict(true) != "met" || Verdict(false) != "MISSED" {
		t.Errorf("Verdict: %q %q", Verdict(true), Verdict(false))
	}
}
