// Command operator is hactl-operator's benchmark (make bench; never run in CI), in the lab (etcd,
// the load balancer, 3 control planes and 3 workers bootstrapped by hactl, the object store; the
// operator deployed with `hactl operator deploy --backup-every 1m`). Three figures, printed with
// the goals side by side, never asserted:
//
//   - idle cost: the Lease holder's CPU (process_cpu_seconds_total over -idle) and resident memory
//     (process_resident_memory_bytes, the largest sample), read from its /metrics through the API
//     server's pod proxy. Goal: < 50 m CPU, < 64 MiB.
//   - takeover: -runs deletions of the holder's pod (graceful: SIGTERM, the Lease released on
//     cancel; goal < 2 s) and -runs SIGKILLs of the holder's process on its node (goal ≤
//     leaseDuration + retryPeriod + 1 s = 17 s): from the fault (just before the delete or the
//     kill is sent) to the new holder's acquireTime in the Lease (holderIdentity changed), so
//     polling the Lease adds nothing to the figure.
//   - slot accuracy over the whole run (-duration, default 60 m, the hour): every 1-minute
//     slot from the first snapshot to the last must be in the bucket exactly once (a slot's key is
//     one object, so doubles show as SnapshotTaken events beyond one per slot); missed slots are
//     counted apart for the minutes of a takeover and outside them (goal: 0 and 0 outside a leader
//     change), with each snapshot's start delay after its slot.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/drill/lease"
	"github.com/hactl/hactl/e2e/lab"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	duration := flag.Duration("duration", time.Hour, "how long the operator snapshots every minute (slot accuracy); the idle and takeover parts run inside it")
	idle := flag.Duration("idle", 5*time.Minute, "idle measurement window")
	runs := flag.Int("runs", 5, "takeovers per method")
	keep := flag.Bool("keep", false, "leave the lab running afterwards")
	flag.Parse()
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		kit.Fail("operator", err)
	}
	h, _ := filepath.Abs(*hactl)
	if err := run(root, h, *duration, *idle, *runs, *keep); err != nil {
		kit.Fail("operator", err)
	}
}

const ns, name = "hactl-system", "hactl-operator"

func run(root, hactl string, duration, idle time.Duration, runs int, keep bool) error {
	ctx := context.Background()
	l, err := kit.UpLab(ctx, ".lab-bench-operator", keep, lab.Options{Members: 3, Workers: true, ObjectStore: true, RepoRoot: root})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	if _, err := l.ObjectStoreEnv(); err != nil {
		return err
	}
	spec := l.SpecPath(3)
	for _, args := range [][]string{
		{"bootstrap", "-f", spec},
		{"kubeconfig", "-f", spec, "--out", l.Kubeconfig()},
		{"operator", "deploy", "-f", spec, "--image-archive", filepath.Join(root, "bin", "hactl-operator-image.tar"), "--backup-every", "1m", "--keep-last", "200"},
	} {
		if _, err := kit.HactlOutput(hactl, args...); err != nil {
			return fmt.Errorf("hactl %s: %w", args[0], err)
		}
	}
	kubectl := func(args ...string) (string, error) { return l.Kubectl(ctx, args...) }
	// holder is the Lease's holderIdentity (controller-runtime's "POD_UUID": a restarted container
	// is a new identity), its pod and acquireTime (written by the holder when it took the Lease, in
	// microseconds; the lab's hosts share this machine's clock).
	holder := func() (id, pod string, acquired time.Time) {
		out, err := kubectl("get", "lease", "-n", ns, name, "-o", "jsonpath={.spec.holderIdentity} {.spec.acquireTime}")
		if err != nil {
			return "", "", time.Time{}
		}
		f := strings.Fields(out)
		if len(f) != 2 {
			return "", "", time.Time{}
		}
		acquired, _ = time.Parse(time.RFC3339Nano, f[1])
		pod, _, _ = strings.Cut(f[0], "_")
		return f[0], pod, acquired
	}
	// The API server keeps Events for an hour (--event-ttl): they are collected as the run goes,
	// by UID, a series by its latest count.
	actions := map[string]int{} // Event UID → actions it records
	slotOf := map[string]string{}
	collect := func() {
		out, err := kubectl("get", "events.events.k8s.io", "-n", ns, "-o", `jsonpath={range .items[?(@.reason=="SnapshotTaken")]}{.metadata.uid}{"\t"}{.series.count}{"\t"}{.note}{"\n"}{end}`)
		if err != nil {
			kit.Logf("listing Events: %v", err)
			return
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.SplitN(line, "\t", 3)
			if len(f) != 3 {
				continue
			}
			rest, ok := strings.CutPrefix(f[2], "slot ")
			if !ok {
				continue
			}
			n, _ := strconv.Atoi(f[1])
			actions[f[0]] = max(actions[f[0]], n, 1)
			slotOf[f[0]], _, _ = strings.Cut(rest, ":")
		}
	}
	stopCollect := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			collect()
			select {
			case <-stopCollect:
				collect()
				return
			case <-time.After(5 * time.Minute):
			}
		}
	}()
	started := time.Now()

	// Idle cost of the holder.
	metric := func(pod, m string) (float64, error) {
		out, err := kubectl("get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics", ns, pod))
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, m+" "); ok {
				return strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		return 0, fmt.Errorf("%s: no %s", pod, m)
	}
	time.Sleep(30 * time.Second)
	_, pod, _ := holder()
	cpu0, err := metric(pod, "process_cpu_seconds_total")
	if err != nil {
		return err
	}
	t0 := time.Now()
	var rss, heap []float64
	for time.Since(t0) < idle {
		if v, err := metric(pod, "process_resident_memory_bytes"); err == nil {
			rss = append(rss, v)
		}
		if v, err := metric(pod, "go_memstats_heap_inuse_bytes"); err == nil {
			heap = append(heap, v)
		}
		time.Sleep(5 * time.Second)
	}
	if len(rss) == 0 || len(heap) == 0 {
		return fmt.Errorf("%s: no memory samples in %s", pod, idle)
	}
	cpu1, err := metric(pod, "process_cpu_seconds_total")
	if err != nil {
		return err
	}
	milli := (cpu1 - cpu0) / time.Since(t0).Seconds() * 1000
	mib := func(v float64) float64 { return v / (1 << 20) }
	fmt.Printf("\nidle (%s, holder %s, one scheduled snapshot a minute): CPU %.1f m (goal < 50 m: %.2f×); resident memory max %.1f MiB, p50 %.1f MiB (goal < 64 MiB: max %.2f×, p50 %.2f×); Go heap in use max %.1f MiB, p50 %.1f MiB (%d samples, every 5 s)\n",
		idle, pod, milli, milli/50, mib(kit.Pct(rss, 100)), mib(kit.Pct(rss, 50)), mib(kit.Pct(rss, 100))/64, mib(kit.Pct(rss, 50))/64, mib(kit.Pct(heap, 100)), mib(kit.Pct(heap, 50)), len(rss))

	// Takeovers.
	var faults []time.Time
	takeover := func(method string) (float64, error) {
		id, pod, _ := holder()
		if id == "" {
			return 0, fmt.Errorf("no holder")
		}
		t := time.Now()
		switch method {
		case "graceful":
			if _, err := kubectl("delete", "pod", "-n", ns, pod, "--wait=false"); err != nil {
				return 0, err
			}
		case "process":
			// SIGKILL of the holder's container task on its node (containerd's CRI labels name the
			// pod and container); kubelet restarts it in place, as a new identity.
			node, err := kubectl("get", "pod", "-n", ns, pod, "-o", "jsonpath={.spec.nodeName}")
			if err != nil {
				return 0, err
			}
			script := lease.SignalContainerScript(pod, "operator", "KILL")
			t = time.Now()
			if out, err := l.Exec(ctx, strings.TrimSpace(node), "sh", "-c", script); err != nil {
				return 0, fmt.Errorf("SIGKILL on %s: %w: %s", node, err, out)
			}
		}
		faults = append(faults, t)
		for time.Since(t) < time.Minute {
			if p, _, acquired := holder(); p != "" && p != id && acquired.After(t) {
				return float64(acquired.Sub(t).Milliseconds()), nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return 0, fmt.Errorf("no takeover within 1m after %s of %s", method, id)
	}
	for _, m := range []struct {
		method, goal string
		goalMs       float64
	}{{"graceful", "< 2 s", 2000}, {"process", "<= leaseDuration + retryPeriod + 1 s = 17 s", 17000}} {
		var ms []float64
		for range runs {
			v, err := takeover(m.method)
			if err != nil {
				kit.Logf("takeover %s: %v", m.method, err)
				continue
			}
			ms = append(ms, v)
			// Both replicas Ready again before the next fault.
			for i := 0; i < 120; i++ {
				if out, _ := kubectl("get", "deployment", "-n", ns, name, "-o", "jsonpath={.status.availableReplicas}"); strings.TrimSpace(out) == "2" {
					break
				}
				time.Sleep(time.Second)
			}
			time.Sleep(10 * time.Second)
		}
		if len(ms) > 0 {
			fmt.Printf("takeover, %s: n=%d p50 %.0f ms, max %.0f ms (goal %s: p50 %.2f×, max %.2f×)\n",
				m.method, len(ms), kit.Pct(ms, 50), kit.Pct(ms, 100), m.goal, kit.Pct(ms, 50)/m.goalMs, kit.Pct(ms, 100)/m.goalMs)
		}
	}

	// Slot accuracy over the rest of the run.
	if rest := duration - time.Since(started); rest > 0 {
		kit.Logf("snapshots every minute for another %s", rest.Round(time.Second))
		time.Sleep(rest)
	}
	out, err := kit.HactlOutput(hactl, "backup", "list", "-f", spec, "-o", "json")
	if err != nil {
		return err
	}
	var ls backup.Listing
	if err := json.Unmarshal(out, &ls); err != nil {
		return err
	}
	have := map[string]bool{}
	var delays []float64
	var first, last time.Time
	for _, s := range ls.Snapshots {
		if s.Slot == "" {
			continue
		}
		st, err := time.Parse(backup.TimeFormat, s.Slot)
		if err != nil {
			continue
		}
		have[s.Slot] = true
		delays = append(delays, s.Metadata.StartedAt.Sub(st).Seconds())
		if first.IsZero() || st.Before(first) {
			first = st
		}
		if st.After(last) {
			last = st
		}
	}
	missedLeader, missedOther := 0, 0
	for s := first; !s.After(last); s = s.Add(time.Minute) {
		if have[s.Format(backup.TimeFormat)] {
			continue
		}
		near := slices.ContainsFunc(faults, func(f time.Time) bool { return s.Add(time.Minute).After(f) && s.Before(f.Add(time.Minute)) })
		if near {
			missedLeader++
		} else {
			missedOther++
		}
	}
	close(stopCollect)
	<-collected
	perSlot := map[string]int{}
	for uid, n := range actions {
		perSlot[slotOf[uid]] += n
	}
	taken, doubled := 0, 0
	for s := first; !s.After(last); s = s.Add(time.Minute) {
		n := perSlot[s.Format(backup.TimeFormat)]
		taken += n
		if n > 1 {
			doubled++
		}
	}
	slots := int(last.Sub(first)/time.Minute) + 1
	fmt.Printf("slots (every 1m) %s → %s: %d slots, %d in the bucket, missed %d outside a leader change (goal 0) and %d within a minute of one; SnapshotTaken actions %d, slots acted on more than once %d (goal 0)\n",
		first.Format(time.RFC3339), last.Format(time.RFC3339), slots, len(have), missedOther, missedLeader, taken, doubled)
	if len(delays) > 0 {
		fmt.Printf("snapshot start after its slot: p50 %.1f s, p90 %.1f s, max %.1f s\n", kit.Pct(delays, 50), kit.Pct(delays, 90), kit.Pct(delays, 100))
	}
	return nil
}
