// Command drill is hactl's failover-drill benchmark (make bench; never run in CI). In the lab (etcd
// and the VIP bootstrapped by hactl, a kubeadm control plane on cp-a/b/c behind the VIP) it runs the
// real `hactl drill` and prints the distributions from its --report files:
//
//   - kill-leader (--method process), -runs consecutive drills (default 20, the zero-loss check on
//     every one) with etcd's defaults (100 ms heartbeat / 1000 ms election timeout), then again after
//     hactl bootstrap rolled the members to 250 ms / 2500 ms. Compared with the physical floor: a
//     follower campaigns after a randomised election timeout between 1x and 2x the setting (etcd
//     raft), so the RTO cannot be below 1x and is typically about 1.5x. Goals: RTO p50 <= 2x the
//     election timeout; measurement resolution <= 20 ms; 0 acknowledged writes lost in all runs.
//   - lb-failover (HAProxy stopped on the VIP holder), -vip-runs drills (default 10), readyz through
//     the VIP on fresh connections every 20 ms. Goal: p50 <= 4 s at advert interval 1 s.
//
// Figures are printed, not asserted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/lab"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	runs := flag.Int("runs", 20, "consecutive kill-leader drills per election setting")
	vipRuns := flag.Int("vip-runs", 10, "lb-failover drills")
	keep := flag.Bool("keep", false, "leave the lab running afterwards")
	flag.Parse()
	if err := run(*hactl, *runs, *vipRuns, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench/drill:", err)
		os.Exit(1)
	}
}

// drillReport runs one `hactl drill ... --report` and reads the report back. A drill that exits 3
// (a failed verdict) still returns its report, with the error.
func drillReport(hactl, dir, name string, args ...string) (*drill.Report, error) {
	rp := filepath.Join(dir, name+".json")
	runErr := kit.Hactl(hactl, append(append([]string{"drill"}, args...), "--yes", "--report", rp)...)
	raw, err := os.ReadFile(rp)
	if err != nil {
		return nil, fmt.Errorf("%s: no report (%v): %w", name, runErr, err)
	}
	rep := &drill.Report{}
	if err := json.Unmarshal(raw, rep); err != nil {
		return nil, err
	}
	return rep, runErr
}

// figures collects one figure of every iteration.
func figures(rep *drill.Report, get func(drill.Iteration) *float64) []float64 {
	var xs []float64
	for _, it := range rep.Iterations {
		if v := get(it); v != nil {
			xs = append(xs, *v)
		}
	}
	return xs
}

func printDist(name string, xs []float64) {
	if len(xs) == 0 {
		fmt.Printf("  %-28s (none measured)\n", name)
		return
	}
	fmt.Printf("  %-28s n=%-3d min %7.0f  p50 %7.0f  p90 %7.0f  max %7.0f ms\n", name, len(xs), kit.Pct(xs, 0), kit.Pct(xs, 50), kit.Pct(xs, 90), kit.Pct(xs, 100))
}

// killLeader runs the kill-leader drills and prints the figures against the floor and goals.
func killLeader(hactl, spec, dir, label string, runs int, election time.Duration) error {
	start := time.Now()
	hold := 2*election + 2*time.Second // an election takes up to 2x the election timeout
	rep, err := drillReport(hactl, dir, "kill-leader-"+label, "kill-leader", "-f", spec, "--count", fmt.Sprint(runs), "--hold", hold.String())
	if rep == nil {
		return err
	}
	et := float64(election / time.Millisecond)
	rto := figures(rep, func(it drill.Iteration) *float64 { return it.RTOMs })
	fmt.Printf("\nkill-leader, --method process, %d consecutive drills, election timeout %s (heartbeat %.0f ms), %s in all\n",
		len(rep.Iterations), election, rep.Settings.HeartbeatIntervalMs, time.Since(start).Round(time.Second))
	printDist("election (new leader seen)", figures(rep, func(it drill.Iteration) *float64 { return it.ElectionMs }))
	printDist("RTO (first acked write)", rto)
	printDist("longest gap between acks", figures(rep, func(it drill.Iteration) *float64 { return it.LongestGapMs }))
	printDist("write latency p99", figures(rep, func(it drill.Iteration) *float64 { return it.WriteP99Ms }))
	printDist("catch-up after restart", figures(rep, func(it drill.Iteration) *float64 { return it.CatchUpMs }))
	printDist("fault instant uncertainty", figures(rep, func(it drill.Iteration) *float64 { v := it.FaultUncertaintyMs; return &v }))
	acked := 0
	for _, it := range rep.Iterations {
		if it.Verification != nil {
			acked += it.Verification.Acked
		}
	}
	fmt.Printf("  physical floor: a follower campaigns after 1x-2x the election timeout = %.0f-%.0f ms (expected about %.0f ms)\n", et, 2*et, 1.5*et)
	if len(rto) > 0 {
		p50 := kit.Pct(rto, 50)
		fmt.Printf("  goal RTO p50 <= 2 x election timeout (%.0f ms): p50 %.0f ms = %.2f x the election timeout: %s\n", 2*et, p50, p50/et, kit.Verdict(p50 <= 2*et))
	}
	fmt.Printf("  goal resolution <= 20 ms: %.0f ms (members and workload every 20 ms): %s\n", rep.Settings.ResolutionMs, kit.Verdict(rep.Settings.ResolutionMs <= 20))
	fmt.Printf("  goal 0 acknowledged writes lost in all %d: %d lost of %d acknowledged (verdict %s): %s\n",
		len(rep.Iterations), rep.LostWrites, acked, rep.Verdict, kit.Verdict(rep.LostWrites == 0 && len(rep.Iterations) == runs))
	return err
}

func run(hactl string, runs, vipRuns int, keep bool) error {
	ctx := context.Background()
	hactl, _ = filepath.Abs(hactl)
	l, err := kit.UpLab(ctx, ".lab-bench", keep, lab.Options{Members: 3, Kubernetes: true})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	root, dir := l.Root, l.Dir()
	spec := l.SpecPath(3)
	if err := kit.Hactl(hactl, "bootstrap", "-f", spec); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	// The bootstrap built the kubeadm control plane too (the lab's specs have spec.kubernetes).
	kubeCA := filepath.Join(dir, "kubernetes-ca.crt")
	ca, err := l.Exec(ctx, "cp-a", "cat", "/etc/kubernetes/pki/ca.crt")
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeCA, []byte(ca), 0o644); err != nil {
		return err
	}
	reports := filepath.Join(dir, "drill-reports")
	if err := os.MkdirAll(reports, 0o755); err != nil {
		return err
	}

	// VIP failover.
	rep, vipErr := drillReport(hactl, reports, "lb-failover", "lb-failover", "-f", spec, "--ca-file", kubeCA, "--count", fmt.Sprint(vipRuns), "--hold", "8s")
	if rep != nil {
		fmt.Printf("\nlb-failover, HAProxy stopped on the VIP holder, %d drills, advert interval %.0f ms, keepalived check %.0f ms x %d\n",
			len(rep.Iterations), rep.Settings.AdvertIntervalMs, rep.Settings.ScriptIntervalMs, rep.Settings.ScriptFall)
		rto := figures(rep, func(it drill.Iteration) *float64 { return it.RTOMs })
		printDist("VIP on the other host", figures(rep, func(it drill.Iteration) *float64 { return it.VIPMovedMs }))
		printDist("readyz 200 again (RTO)", rto)
		printDist("settle after the put-back", figures(rep, func(it drill.Iteration) *float64 { return it.SettleMs }))
		printDist("failback outage", figures(rep, func(it drill.Iteration) *float64 { return it.FailbackOutageMs }))
		if len(rto) > 0 {
			fmt.Printf("  goal VIP failover p50 <= 4 s: %.0f ms: %s\n", kit.Pct(rto, 50), kit.Verdict(kit.Pct(rto, 50) <= 4000))
		}
	}

	// kill-leader with the defaults, then 250/2500 (hactl bootstrap restarts the members one at a
	// time, leader last).
	errDefault := killLeader(hactl, spec, reports, "100-1000", runs, time.Second)
	slow := filepath.Join(dir, "cluster-3-250-2500.yaml")
	c, err := lab.BuildSpec(3, dir, filepath.Join(root, "bin"))
	if err != nil {
		return err
	}
	c.Spec.Etcd.HeartbeatInterval.Duration = 250 * time.Millisecond
	c.Spec.Etcd.ElectionTimeout.Duration = 2500 * time.Millisecond
	out, err := lab.MarshalSpec(c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(slow, out, 0o644); err != nil {
		return err
	}
	if err := kit.Hactl(hactl, "bootstrap", "-f", slow); err != nil {
		return fmt.Errorf("bootstrap with 250/2500: %w", err)
	}
	errSlow := killLeader(hactl, slow, reports, "250-2500", runs, 2500*time.Millisecond)
	fmt.Printf("\nreports: %s\n", reports)
	if vipErr != nil || errDefault != nil || errSlow != nil {
		return fmt.Errorf("a drill failed its verdict or did not run: lb-failover %v; kill-leader 100/1000 %v; 250/2500 %v", vipErr, errDefault, errSlow)
	}
	return nil
}
