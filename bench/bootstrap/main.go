// Command bootstrap is hactl's bootstrap benchmark (make bench; never run in CI): in the lab (the spec
// with the load balancer), with the binaries built and the image cached, it measures the wall time of
// a 3-member and a 5-member bootstrap on fresh hosts (members and LB hosts), the no-op re-run (and a
// second one, when the hosts' checksum cache holds what the first hashed), and the SSH commands each host
// got on the no-op run. With -before it measures a second hactl binary (e.g. a build of the previous
// release) the same way, run for run on the same hosts, and prints both side by side. Every figure
// is printed next to its goal and to the anchor issue 11 measured with the code before it; nothing
// is asserted.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/report"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary (after)")
	before := flag.String("before", "", "a second hactl binary to measure the same way (before); empty: none")
	runs := flag.Int("runs", 3, "repetitions of each measurement")
	kubeRuns := flag.Int("kube-runs", 2, "repetitions of the Kubernetes bootstrap (about 2 minutes each)")
	keep := flag.Bool("keep", false, "leave the lab running afterwards")
	kubeOnly := flag.Bool("kube-only", false, "measure only the Kubernetes bootstrap")
	flag.Parse()
	if !*kubeOnly {
		if err := run(*hactl, *before, *runs, *keep); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if err := runKube(*hactl, *kubeRuns, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sample is one bootstrap run: its wall time, the SSH commands per host (members and the
// control-plane, LB and worker hosts) and the time of each phase that ran (progress lines "[title]
// ✓ 1.2s").
type sample struct {
	wall     time.Duration
	commands map[string]int
	phases   map[string]time.Duration
	order    []string
}

var phaseDone = regexp.MustCompile(`^\[([^\]]+)\] ✓ (\S+)$`)

func bootstrapOnce(hactl, spec string) (sample, error) {
	start := time.Now()
	cmd := exec.Command(hactl, "bootstrap", "-f", spec, "-o", "json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("%s bootstrap -f %s: %w\n%s", hactl, spec, err, errb.String())
	}
	wall := time.Since(start)
	var res report.Cluster
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return sample{}, err
	}
	s := sample{wall: wall, commands: map[string]int{}, phases: map[string]time.Duration{}}
	for _, line := range strings.Split(errb.String(), "\n") {
		if m := phaseDone.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			if d, err := time.ParseDuration(m[2]); err == nil {
				s.phases[m[1]] = d
				s.order = append(s.order, m[1])
			}
		}
	}
	for _, m := range res.Members {
		s.commands[m.Name] = m.Commands
	}
	for _, h := range res.Hosts {
		s.commands[h.Name] = max(s.commands[h.Name], h.Commands)
	}
	return s, nil
}

// measurement is one row: a goal, the anchor from issue 11 (the code before it, measured on a fresh
// machine), and the runs of each binary.
type measurement struct {
	name         string
	goal         time.Duration
	anchor       string
	after, prior []sample
}

// binary is one hactl under test.
type binary struct{ label, path string }

func run(hactl, before string, runs int, keep bool) error {
	ctx := context.Background()
	bins := []binary{{"after", hactl}}
	if before != "" {
		bins = append(bins, binary{"before", before})
	}
	for i := range bins {
		p, err := filepath.Abs(bins[i].path)
		if err != nil {
			return err
		}
		bins[i].path = p
	}
	l, err := kit.UpLab(ctx, ".lab-bench", keep, lab.Options{Members: 5})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	root, dir := l.Root, l.Dir()
	var rows []*measurement
	for _, members := range []int{3, 5} {
		// Every host of the spec is fresh, the LB hosts too: a fresh run installs HAProxy and
		// Keepalived and waits for the first VRRP election, as the anchor measured.
		c, err := lab.BuildSpec(members, dir, filepath.Join(root, "bin"))
		if err != nil {
			return err
		}
		var hosts []string
		for _, h := range c.Spec.Hosts {
			hosts = append(hosts, h.Name)
		}
		fresh := &measurement{name: fmt.Sprintf("bootstrap %d members (fresh hosts)", members)}
		noop := &measurement{name: fmt.Sprintf("no-op re-run, %d members", members)}
		// The second re-run finds the hosts' checksum cache filled by the first (which hashed
		// what the fresh run had written): the steady state of a cluster re-applied in CI.
		warm := &measurement{name: fmt.Sprintf("no-op again, %d (sums cached)", members)}
		if members == 3 {
			fresh.goal, fresh.anchor = 8*time.Second, "10.5-18.2s"
			noop.goal, noop.anchor = 1500*time.Millisecond, "2.6-2.7s"
		} else {
			noop.goal, noop.anchor = 2500*time.Millisecond, "3.9-4.6s"
		}
		for i := 0; i < runs; i++ {
			for _, b := range bins {
				if err := l.Recreate(ctx, hosts...); err != nil {
					return err
				}
				spec := l.SpecPath(members)
				os.RemoveAll(filepath.Join(dir, fmt.Sprintf("state-%d", members)))
				f, err := bootstrapOnce(b.path, spec)
				if err != nil {
					return err
				}
				n, err := bootstrapOnce(b.path, spec)
				if err != nil {
					return err
				}
				w, err := bootstrapOnce(b.path, spec)
				if err != nil {
					return err
				}
				if b.label == "after" {
					fresh.after, noop.after, warm.after = append(fresh.after, f), append(noop.after, n), append(warm.after, w)
				} else {
					fresh.prior, noop.prior, warm.prior = append(fresh.prior, f), append(noop.prior, n), append(warm.prior, w)
				}
			}
		}
		warm.goal = noop.goal
		rows = append(rows, fresh, noop, warm)
	}
	printRows(rows, before != "")
	return nil
}

func best(ss []sample) time.Duration {
	var b time.Duration
	for i, s := range ss {
		if i == 0 || s.wall < b {
			b = s.wall
		}
	}
	return b
}

func walls(ss []sample) string {
	var w []string
	for _, s := range ss {
		w = append(w, s.wall.Round(10*time.Millisecond).String())
	}
	return strings.Join(w, " ")
}

// commands is "cp-a 2, cp-b 2, ..." of the last sample, and the largest count.
func commands(ss []sample) (string, int) {
	if len(ss) == 0 {
		return "-", 0
	}
	c := ss[len(ss)-1].commands
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.Sort(names)
	most := 0
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, c[n]))
		most = max(most, c[n])
	}
	return strings.Join(parts, ", "), most
}

func printRows(rows []*measurement, withBefore bool) {
	fmt.Println()
	fmt.Printf("%-34s %-10s %-22s %-6s %-10s", "measurement", "goal", "after (runs)", "/goal", "anchor")
	if withBefore {
		fmt.Printf(" %-22s %-8s", "before (runs)", "after/before")
	}
	fmt.Println()
	for _, r := range rows {
		goal, ratio := "-", "-"
		if r.goal > 0 {
			goal = r.goal.String()
			ratio = fmt.Sprintf("%.2f", float64(best(r.after))/float64(r.goal))
		}
		fmt.Printf("%-34s %-10s %-22s %-6s %-10s", r.name, goal, walls(r.after), ratio, r.anchor)
		if withBefore {
			fmt.Printf(" %-22s %.2f", walls(r.prior), float64(best(r.after))/float64(best(r.prior)))
		}
		fmt.Println()
	}
	fmt.Println("\nSSH commands per host on the no-op re-run (goal: <= 4 per host; anchor: 6 per control-plane host)")
	for _, r := range rows {
		if !strings.HasPrefix(r.name, "no-op") {
			continue
		}
		after, most := commands(r.after)
		fmt.Printf("  %-30s after:  %s (most %d, %.2f of the goal)\n", r.name, after, most, float64(most)/4)
		if withBefore {
			prior, pmost := commands(r.prior)
			fmt.Printf("  %-30s before: %s (most %d)\n", "", prior, pmost)
		}
	}
	fmt.Println("\n/goal = best wall time / goal (below 1.00 meets it); after/before = best after / best before (below 1.00 is faster)")
}

// runKube measures the Kubernetes bootstrap (issue 12): etcd, the load balancer, 3 control planes
// and 3 workers on fresh hosts, then the no-op re-run: wall time, SSH commands per host and the
// time of each phase, next to the goals (fresh <= 90 s, re-run <= 5 s) and the anchors measured in
// this lab before hactl built Kubernetes (kubeadm init 7-11 s, a control-plane join about 21 s).
func runKube(hactl string, runs int, keep bool) error {
	ctx := context.Background()
	hactl, err := filepath.Abs(hactl)
	if err != nil {
		return err
	}
	l, err := kit.UpLab(ctx, ".lab-bench", keep, lab.Options{Members: 3, Workers: true})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	dir := l.Dir()
	c, err := lab.ReadSpec(l.SpecPath(3))
	if err != nil {
		return err
	}
	var hosts []string
	for _, h := range c.Spec.Hosts {
		hosts = append(hosts, h.Name)
	}
	var fresh, noop []sample
	for i := 0; i < runs; i++ {
		if i > 0 {
			if err := l.Recreate(ctx, hosts...); err != nil {
				return err
			}
		}
		os.RemoveAll(filepath.Join(dir, "state-3"))
		f, err := bootstrapOnce(hactl, l.SpecPath(3))
		if err != nil {
			return err
		}
		n, err := bootstrapOnce(hactl, l.SpecPath(3))
		if err != nil {
			return err
		}
		fresh, noop = append(fresh, f), append(noop, n)
	}
	fmt.Println("\nKubernetes: etcd + load balancer + 3 control planes + 3 workers (issue 12)")
	fmt.Printf("%-34s %-10s %-22s %-6s\n", "measurement", "goal", "runs", "/goal")
	fmt.Printf("%-34s %-10s %-22s %.2f\n", "bootstrap, fresh hosts", "90s", walls(fresh), float64(best(fresh))/float64(90*time.Second))
	fmt.Printf("%-34s %-10s %-22s %.2f\n", "no-op re-run", "5s", walls(noop), float64(best(noop))/float64(5*time.Second))
	after, most := commands(noop)
	fmt.Printf("SSH commands per host on the no-op re-run: %s (most %d)\n", after, most)
	freshCmds, freshMost := commands(fresh)
	fmt.Printf("SSH commands per host on the fresh run: %s (most %d)\n", freshCmds, freshMost)
	fmt.Println("\ntime per phase (fresh runs; anchors: kubeadm init 7-11s, a control-plane join about 21s, measured in this lab by the lab's own kubeadm code)")
	for _, ph := range fresh[len(fresh)-1].order {
		var ds []string
		for _, s := range fresh {
			ds = append(ds, s.phases[ph].Round(10*time.Millisecond).String())
		}
		anchor := ""
		switch ph {
		case "kube/init":
			anchor = "anchor 7-11s"
		case "kube/join":
			anchor = "anchor ~21s per control plane (2 here, one at a time), then the workers"
		}
		fmt.Printf("  %-18s %-26s %s\n", ph, strings.Join(ds, " "), anchor)
	}
	fmt.Println("\ntime per phase (no-op re-runs)")
	for _, ph := range noop[len(noop)-1].order {
		var ds []string
		for _, s := range noop {
			ds = append(ds, s.phases[ph].Round(time.Millisecond).String())
		}
		fmt.Printf("  %-18s %s\n", ph, strings.Join(ds, " "))
	}
	return nil
}
