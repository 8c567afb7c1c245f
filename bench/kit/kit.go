// Package kit is what every benchmark main under bench/ shares: the lab bring-up (UpLab, Lab),
// progress lines on stderr, the exit on a failed run, nearest-rank percentiles, the "met"/"MISSED"
// column against a goal, and running the hactl binary under test. Benchmarks print figures; they
// never assert timings (the brief's "performance is measured, not asserted").
package kit

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/percentile"
)

// Logf writes one progress line to stderr (stdout is kept for the figures).
func Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Fail ends a benchmark that could not run: "bench/<name>: err" on stderr, exit status 1.
func Fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "bench/%s: %v\n", name, err)
	os.Exit(1)
}

// Pct returns the p-th percentile (p in 0..100) of xs by the nearest-rank method: the smallest
// value with at least p% of the values at or below it (so Pct(xs, 50) of 10 runs is the 5th
// smallest and Pct(xs, 100) the largest). xs is not modified; an empty xs gives NaN.
func Pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentile.NearestRank(s, p)
}

// Verdict is a figure's column against its goal: "met" or "MISSED".
func Verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// Secs formats d in seconds with two decimals ("1.27s").
func Secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// Hactl runs the hactl binary at path with args, its stdout and stderr on this process's stderr
// (progress for the reader). Errors: exec's, *exec.ExitError for a non-zero exit.
func Hactl(path string, args ...string) error {
	Logf("$ hactl %s", strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// HactlOutput runs hactl like Hactl but returns its stdout (for -o json and reports).
func HactlOutput(path string, args ...string) ([]byte, error) {
	Logf("$ hactl %s", strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stderr = os.Stderr
	return cmd.Output()
}
