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
	workload := "no workload"
	if r.Scheduler != "" {
		workload = fmt.Sprintf("%d pods/s for %s", r.Rate, r.Scheduler)
	}
	fmt.Fprintf(w, "drill kill-leader --target %s (%s, via %s): %s, budget %.0fms, resolution %.0fms (watch events, this machine's clock)\n\n", r.Target, r.Method, r.Via,
		workload, r.MaxRTOMs, r.ResolutionMs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tKILLED\tOLD HOLDER\tNEW HOLDER\tTAKEOVER\tFIRST BIND\tLONGEST GAP\tPENDING PEAK\tBOUND\tRESULT")
	for i, it := range r.Iter {
		peak, bound := "-", "-"
		if r.Scheduler != "" {
			peak, bound = fmt.Sprint(it.PendingPeak), fmt.Sprintf("%d/%d", it.PodsBound, it.PodsCreated)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, it.Killed, short(it.OldHolder), short(it.NewHolder),
			fmtMs(it.TakeoverMs), fmtMs(it.FirstBindMs), fmtMs(it.LongestGapMs), peak, bound, dash(it.Verdict))
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
		for _, s := range it.Slots {
			fmt.Fprintf(w, "  slot %s of %s: %d action(s) by %s\n", s.Slot, s.Object, s.Actions, dash(strings.Join(s.By, ", ")))
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
