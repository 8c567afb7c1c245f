// Package percentile is hactl's one nearest-rank percentile: the drill workload's latencies, the
// etcd preflight's fsync probe and the benchmarks' figures all take theirs from here.
package percentile

import (
	"cmp"
	"math"
)

// NearestRank returns the p-th percentile (p in 0..100) of sorted, which must be sorted ascending,
// by the nearest-rank method: the ⌈p·n/100⌉-th smallest value, i.e. the smallest value with at
// least p% of the values at or below it (p 50 of 10 values is the 5th smallest, p 100 the largest,
// p 0 the smallest). It returns T's zero value when sorted is empty; p outside 0..100 is clamped to
// the smallest or largest value.
func NearestRank[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	rank := int(math.Ceil(p * float64(len(sorted)) / 100))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
