package percentile

import (
	"testing"
	"time"
)

func TestNearestRank(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	for _, tc := range []struct {
		name string
		in   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one value p50", []float64{7}, 50, 7},
		{"one value p99", []float64{7}, 99, 7},
		{"two values p50", []float64{1, 2}, 50, 1},
		{"two values p51", []float64{1, 2}, 51, 2},
		{"two values p99", []float64{1, 2}, 99, 2},
		{"ten p0", ten, 0, 1},
		{"ten p10", ten, 10, 1},
		{"ten p11", ten, 11, 2},
		{"ten p50", ten, 50, 5},
		{"ten p90", ten, 90, 9},
		{"ten p100", ten, 100, 10},
		{"hundred p7 (no float drift past the rank)", hundred, 7, 7},
		{"hundred p50", hundred, 50, 50},
		{"hundred p99", hundred, 99, 99},
		{"hundred p100", hundred, 100, 100},
		{"p above 100 clamps", ten, 150, 10},
		{"p below 0 clamps", ten, -5, 1},
	} {
		if got := NearestRank(tc.in, tc.p); got != tc.want {
			t.Errorf("%s: NearestRank(%d values, %v) = %v, want %v", tc.name, len(tc.in), tc.p, got, tc.want)
		}
	}
	// Any ordered type: durations, as the drill and the preflight use it.
	if got := NearestRank([]time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}, 99); got != 3*time.Millisecond {
		t.Errorf("NearestRank(durations, 99) = %s, want 3ms", got)
	}
	if got := NearestRank([]time.Duration(nil), 50); got != 0 {
		t.Errorf("NearestRank(no durations) = %s, want 0", got)
	}
}
