package lease

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes the report as the etcd drills do: settings, one row per iteration, the proof and the
// verdict.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "drill kill-leader --target %s (%s, via %s): %d pods/s for %s, budget %.0fms, resolution %.0fms (watch events, this machine's clock)\n\n", r.Target, r.Method, r.Via,
		r.Rate, dash(r.Scheduler), r.MaxRTOMs, r.ResolutionMs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tKILLED\tOLD HOLDER\tNEW HOLDER\tTAKEOVER\tFIRST BIND\tLONGEST GAP\tPENDING PEAK\tBOUND\tRESULT")
	for i, it := range r.Iter {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\n", i+1, it.Killed, short(it.OldHolder), short(it.NewHolder),
			fmtMs(it.TakeoverMs), fmtMs(it.FirstBindMs), fmtMs(it.LongestGapMs), it.PendingPeak, it.PodsBound, it.PodsCreated, dash(it.Verdict))
	}
	tw.Flush()
	for i, it := range r.Iter {
		fmt.Fprintf(w, "\niteration %d: no two leaders: %s\n", i+1, it.Proof)
		for _, win := range it.Windows {
			fmt.Fprintf(w, "  %-40s %4d pods  revisions %d-%d  %+.0fms .. %+.0fms\n", win.Identity, win.Pods, win.FirstRev, win.LastRev, win.FirstMs, win.LastMs)
		}
		for _, o := range it.Overlaps {
			fmt.Fprintf(w, "  OVERLAP: %s\n", o)
		}
	}
	fmt.Fprintf(w, "\nresult: %s", r.Result)
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(r.Failures, "; "))
	}
	if r.Error != "" {
		fmt.Fprintf(w, " (error: %s)", r.Error)
	}
	fmt.Fprintln(w)
}

// short keeps a holderIdentity's hostname and the UUID's first 8 characters.
func short(holder string) string {
	if holder == "" {
		return "-"
	}
	h, id, ok := strings.Cut(holder, "_")
	if ok && len(id) > 8 {
		return h + "_" + id[:8]
	}
	return holder
}
