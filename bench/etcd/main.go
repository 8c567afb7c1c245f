// Command etcd is hactl's etcd day-2 benchmark (make bench; never run in CI). In the lab (a
// 3-member etcd bootstrapped by hactl, spare hosts beside it) it measures:
//
//   - member replace under the drills' writer (50 writes/s): -runs consecutive `hactl etcd member
//     replace OLD --with NEW` (the old member alive, so add-first: learner, promote, remove), each
//     onto the host the previous one freed (cp-a and etcd-d, both in zone az-a, in turn). Figures: wall time, the longest gap between acknowledged
//     writes and the writes that failed. Anchor: etcd's election timeout (1000 ms): a replacement
//     needs no election unless OLD leads (leadership is then moved, not lost), so the goal is a
//     longest gap under 1x the election timeout and 0 acknowledged writes lost.
//   - defragmentation of a -defrag-mib database (default 1024 MiB) with about half its pages free:
//     first one follower defragmented directly (Maintenance.Defragment, as etcdctl defrag does: the
//     anchor), then `hactl etcd defrag` over all members under the writer. Figures: each member's
//     time, the ratio of hactl's per-member time to the direct call, hactl's wall time against the
//     members' sum, and the longest gap between acknowledged writes meanwhile.
//   - rolling upgrade under the writer: -upgrades rounds, each on three freshly recreated hosts: a
//     cluster bootstrapped at the newest v3.5 (bin/etcd-v3.5), then `hactl bootstrap` of the same
//     spec at the lab's v3.6 (one member at a time, leader last, each healthy and caught up, the
//     cluster version checked). Figures: wall time, the longest gap between acknowledged writes,
//     writes failed and lost. Anchor: 2x etcd's election timeout (2000 ms): the leader's restart
//     costs at most one election (etcd hands leadership over on a graceful stop), the followers'
//     none; goal: longest gap under 2x the election timeout, 0 acknowledged writes lost.
//
// Figures are printed, not asserted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/maintenance"
	"github.com/hactl/hactl/etcd/membership"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	runs := flag.Int("runs", 4, "consecutive member replacements")
	defragMiB := flag.Int("defrag-mib", 1024, "database size written before the defragmentation, in MiB (0: skip)")
	upgrades := flag.Int("upgrades", 3, "rolling upgrades v3.5 → v3.6, each on a fresh cluster (0: skip)")
	keep := flag.Bool("keep", false, "leave the lab running afterwards")
	flag.Parse()
	if err := run(*hactl, *runs, *defragMiB, *upgrades, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench/etcd:", err)
		os.Exit(1)
	}
}

// hactlJSON runs hactl with -o json appended, progress on stderr, and decodes stdout into v.
func hactlJSON(hactl string, v any, args ...string) error {
	cmd := exec.Command(hactl, append(args, "-o", "json")...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("hactl %s: %w", strings.Join(args, " "), err)
	}
	return json.Unmarshal(out, v)
}

// spec writes the lab's spec with exactly the etcd hosts members (no load balancer) to dir/name.
func spec(dir, binDir, name string, members []string) (string, error) {
	c, err := lab.BuildSpec(5, dir, binDir)
	if err != nil {
		return "", err
	}
	lab.WithoutLoadBalancer(c)
	c.Spec.Hosts = slices.DeleteFunc(c.Spec.Hosts, func(h v1alpha1.Host) bool { return !slices.Contains(members, h.Name) })
	return writeSpec(c, filepath.Join(dir, name))
}

func client(ctx context.Context, tls etcd.TLSFiles, l *lab.Lab, hosts []string) (*clientv3.Client, error) {
	var endpoints []string
	for _, name := range hosts {
		h, err := l.Host(name)
		if err != nil {
			return nil, err
		}
		endpoints = append(endpoints, "https://"+h.Address+":2379")
	}
	return etcd.NewClient(ctx, endpoints, tls, 5*time.Second)
}

func run(hactl string, runs, defragMiB, upgrades int, keep bool) error {
	ctx := context.Background()
	hactl, _ = filepath.Abs(hactl)
	l, err := kit.UpLab(ctx, ".lab-bench-etcd", keep, lab.Options{Members: 5})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	dir, binDir := l.Dir(), filepath.Join(l.Root, "bin")
	members := []string{"cp-a", "cp-b", "cp-c"}
	spare := "etcd-d"
	first, err := spec(dir, binDir, "etcd-bench-0.yaml", members)
	if err != nil {
		return err
	}
	var boot json.RawMessage
	if err := hactlJSON(hactl, &boot, "bootstrap", "-f", first); err != nil {
		return err
	}
	c, err := lab.BuildSpec(5, dir, binDir)
	if err != nil {
		return err
	}
	tls := etcd.HactlClientTLS(c)
	cli, err := client(ctx, tls, l.Lab, []string{"cp-a", "cp-b", "cp-c", "etcd-d"})
	if err != nil {
		return err
	}
	defer cli.Close()

	fmt.Printf("member replace (old member alive: add-first), %d consecutive, writer at 50 writes/s\n", runs)
	var walls, gaps []time.Duration
	var lost, failed int
	last := first
	for i := range runs {
		// The member in the spare's zone goes (the spec's zone rule holds in every round).
		old := members[slices.IndexFunc(members, func(m string) bool { return zoneOf(c, m) == zoneOf(c, spare) })]
		next := slices.Clone(members)
		next[slices.Index(next, old)] = spare
		p, err := spec(dir, binDir, fmt.Sprintf("etcd-bench-%d.yaml", i+1), next)
		if err != nil {
			return err
		}
		w, err := workload.Start(ctx, workload.Config{Client: cli, Prefix: fmt.Sprintf("/hactl-bench/replace/%d/", i), Rate: 50})
		if err != nil {
			return err
		}
		start := time.Now()
		var res membership.ReplaceResult
		rerr := hactlJSON(hactl, &res, "etcd", "member", "replace", old, "--with", spare, "-f", p, "--yes")
		wall := time.Since(start)
		st, lostNow, err := finish(ctx, cli, w, rerr)
		if err != nil {
			return err
		}
		lost += lostNow
		failed += st.Failed
		walls, gaps = append(walls, wall), append(gaps, st.LongestGap)
		leader := ""
		if res.Removal != nil && res.Removal.WasLeader {
			leader = " (old was the leader: moved to " + res.Removal.NewLeader + ")"
		}
		fmt.Printf("  %d. %s → %s %s: %6.1f s, longest write gap %5.0f ms, %d failed, %d lost of %d acked%s\n",
			i+1, old, spare, res.Order, wall.Seconds(), float64(st.LongestGap)/1e6, st.Failed, lostNow, st.Acked, leader)
		// OLD is no host of the new spec, so hactl left its unit: retire it as an operator would.
		if _, err := l.Exec(ctx, old, "sh", "-c", "systemctl disable --now etcd.service; mv -T /var/lib/etcd /var/lib/etcd.bench-"+strconv.Itoa(i)); err != nil {
			return err
		}
		members, spare, last = next, old, p
	}
	if len(walls) > 0 {
		maxGap := slices.Max(gaps)
		fmt.Printf("  wall time: min %.1f s, max %.1f s; longest write gap over all %.0f ms = %.2f x the election timeout (1000 ms): goal < 1x %s\n",
			slices.Min(walls).Seconds(), slices.Max(walls).Seconds(), float64(maxGap)/1e6, float64(maxGap)/1e9, kit.Verdict(maxGap < time.Second))
		fmt.Printf("  acknowledged writes lost: %d (goal 0: %s); writes that failed (not acknowledged): %d\n", lost, kit.Verdict(lost == 0), failed)
	}
	if defragMiB > 0 {
		if err := defrag(ctx, hactl, last, cli, tls, members, defragMiB); err != nil {
			return err
		}
	}
	if upgrades > 0 {
		return upgrade(ctx, hactl, l.Lab, dir, binDir, members, upgrades)
	}
	return nil
}

// upgrade runs rounds rolling upgrades from bin/etcd-v3.5 to the lab's etcd, each on hosts
// recreated fresh, under the writer.
func upgrade(ctx context.Context, hactl string, l *lab.Lab, dir, binDir string, hosts []string, rounds int) error {
	oldBin := filepath.Join(binDir, "etcd-v3.5")
	out, err := exec.Command(filepath.Join(oldBin, "etcd"), "--version").Output()
	if err != nil {
		return fmt.Errorf("bin/etcd-v3.5/etcd (make etcd-bins): %w", err)
	}
	from := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "etcd Version:"))
	fmt.Printf("\nrolling upgrade v%s → the lab's etcd, %d round(s) on %v, writer at 50 writes/s\n", from, rounds, hosts)
	var walls, gaps []time.Duration
	var lost, failed int
	for i := range rounds {
		if err := l.Recreate(ctx, hosts...); err != nil {
			return err
		}
		stateDir := filepath.Join(dir, fmt.Sprintf("state-upgrade-%d", i))
		if err := os.RemoveAll(stateDir); err != nil { // an earlier run's, naming hosts recreated since
			return err
		}
		c, err := lab.BuildSpec(5, dir, binDir)
		if err != nil {
			return err
		}
		lab.WithoutLoadBalancer(c)
		c.Spec.Hosts = slices.DeleteFunc(c.Spec.Hosts, func(h v1alpha1.Host) bool { return !slices.Contains(hosts, h.Name) })
		c.Spec.StateDir = stateDir
		to, err := writeSpec(c, filepath.Join(dir, fmt.Sprintf("etcd-upgrade-%d-to.yaml", i)))
		if err != nil {
			return err
		}
		c.Spec.Etcd.Version = "v" + from
		c.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{Etcd: filepath.Join(oldBin, "etcd"), Etcdctl: filepath.Join(oldBin, "etcdctl"), Etcdutl: filepath.Join(oldBin, "etcdutl")}
		fromSpec, err := writeSpec(c, filepath.Join(dir, fmt.Sprintf("etcd-upgrade-%d-from.yaml", i)))
		if err != nil {
			return err
		}
		var boot json.RawMessage
		if err := hactlJSON(hactl, &boot, "bootstrap", "-f", fromSpec); err != nil {
			return err
		}
		cli, err := client(ctx, etcd.HactlClientTLS(c), l, hosts)
		if err != nil {
			return err
		}
		w, err := workload.Start(ctx, workload.Config{Client: cli, Prefix: fmt.Sprintf("/hactl-bench/upgrade/%d/", i), Rate: 50})
		if err != nil {
			cli.Close()
			return err
		}
		time.Sleep(time.Second) // the writer runs before the roll starts
		start := time.Now()
		var res struct {
			EtcdClusterVersion string `json:"etcdClusterVersion"`
		}
		rerr := hactlJSON(hactl, &res, "bootstrap", "-f", to)
		wall := time.Since(start)
		st, lostNow, err := finish(ctx, cli, w, rerr)
		cli.Close()
		if err != nil {
			return err
		}
		lost += lostNow
		failed += st.Failed
		walls, gaps = append(walls, wall), append(gaps, st.LongestGap)
		fmt.Printf("  %d. v%s → cluster version %s: %6.1f s, longest write gap %5.0f ms, %d failed, %d lost of %d acked\n",
			i+1, from, res.EtcdClusterVersion, wall.Seconds(), float64(st.LongestGap)/1e6, st.Failed, lostNow, st.Acked)
	}
	maxGap := slices.Max(gaps)
	fmt.Printf("  wall time: min %.1f s, max %.1f s; longest write gap over all %.0f ms = %.2f x 2x the election timeout (2000 ms): goal < 1x %s\n",
		slices.Min(walls).Seconds(), slices.Max(walls).Seconds(), float64(maxGap)/1e6, float64(maxGap)/2e9, kit.Verdict(maxGap < 2*time.Second))
	fmt.Printf("  acknowledged writes lost: %d (goal 0: %s); writes that failed (not acknowledged): %d\n", lost, kit.Verdict(lost == 0), failed)
	return nil
}

// finish lets the writer see the cluster for one more second after the measured command, stops it
// and reads every acknowledged write back: its figures and the acknowledged writes lost. cmdErr is
// the command's error, returned first (the writer is stopped either way).
func finish(ctx context.Context, cli *clientv3.Client, w *workload.Run, cmdErr error) (workload.Stats, int, error) {
	time.Sleep(time.Second)
	rec := w.Stop()
	if cmdErr != nil {
		return workload.Stats{}, 0, cmdErr
	}
	v, err := workload.Verify(ctx, cli, rec)
	if err != nil {
		return workload.Stats{}, 0, err
	}
	return rec.Stats(time.Time{}), v.Lost, nil
}

// writeSpec writes c to path.
func writeSpec(c *v1alpha1.Cluster, path string) (string, error) {
	out, err := lab.MarshalSpec(c)
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, out, 0o644)
}

// defrag fills the database with mib MiB of 1 MiB values, deletes every other key and compacts (about
// half the pages free), then times one follower's direct Defragment against hactl etcd defrag.
func defrag(ctx context.Context, hactl, specPath string, cli *clientv3.Client, tls etcd.TLSFiles, members []string, mib int) error {
	value := strings.Repeat("x", 1<<20)
	start := time.Now()
	for i := range mib {
		if _, err := cli.Put(ctx, fmt.Sprintf("/hactl-bench/defrag/%06d", i), value); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
	}
	fmt.Printf("\ndefragmentation: %d MiB written in %.1f s\n", mib, time.Since(start).Seconds())
	for i := 0; i < mib; i += 2 {
		if _, err := cli.Delete(ctx, fmt.Sprintf("/hactl-bench/defrag/%06d", i)); err != nil {
			return err
		}
	}
	var compact maintenance.CompactResult
	if err := hactlJSON(hactl, &compact, "etcd", "compact", "-f", specPath, "--retain", "0", "--yes"); err != nil {
		return err
	}
	st, err := etcd.Status(ctx, cli.Endpoints(), tls)
	if err != nil {
		return err
	}
	var follower etcd.EndpointStatus
	for _, ep := range st.Endpoints {
		if ep.Healthy && ep.MemberName != st.LeaderName && slices.Contains(members, ep.MemberName) {
			follower = ep
			break
		}
	}
	if follower.Endpoint == "" {
		return fmt.Errorf("no healthy follower: %+v", st.Endpoints)
	}
	t0 := time.Now()
	if _, err := cli.Defragment(ctx, follower.Endpoint); err != nil {
		return fmt.Errorf("direct defragment of %s: %w", follower.MemberName, err)
	}
	direct := time.Since(t0)
	fmt.Printf("  anchor: Maintenance.Defragment of %s directly (etcdctl defrag): %.2f s at %.0f MiB (%.1f%% free)\n",
		follower.MemberName, direct.Seconds(), float64(follower.DBSizeBytes)/(1<<20), follower.FragmentationPercent)
	var res maintenance.DefragResult
	w, err := workload.Start(ctx, workload.Config{Client: cli, Prefix: "/hactl-bench/defrag-writer/", Rate: 50})
	if err != nil {
		return err
	}
	t0 = time.Now()
	derr := hactlJSON(hactl, &res, "etcd", "defrag", "-f", specPath, "--min-fragmentation", "10", "--yes")
	wall := time.Since(t0)
	ws, lost, err := finish(ctx, cli, w, derr)
	if err != nil {
		return err
	}
	var sum float64
	for _, m := range res.Members {
		if m.Skipped != "" {
			fmt.Printf("  %-8s skipped: %s\n", m.Name, m.Skipped)
			continue
		}
		sum += m.DurationMs
		fmt.Printf("  %-8s leader=%-5v %6.0f MiB → %5.0f MiB in %6.2f s = %.2f x the direct call\n",
			m.Name, m.Leader, float64(m.BeforeBytes)/(1<<20), float64(m.AfterBytes)/(1<<20), m.DurationMs/1e3, m.DurationMs/1e3/direct.Seconds())
	}
	fmt.Printf("  hactl etcd defrag wall time %.2f s, the members' defragmentations %.2f s of it (%.2f x)\n", wall.Seconds(), sum/1e3, wall.Seconds()/(sum/1e3))
	fmt.Printf("  writer at 50 writes/s during hactl etcd defrag: longest write gap %.0f ms (a member blocks while it defragments; the client moves to another), %d failed, %d lost of %d acked (goal 0 lost: %s)\n",
		float64(ws.LongestGap)/1e6, ws.Failed, lost, ws.Acked, kit.Verdict(lost == 0))
	return nil
}

func zoneOf(c *v1alpha1.Cluster, host string) string {
	for _, h := range c.Spec.Hosts {
		if h.Name == host {
			return h.Zone
		}
	}
	return ""
}
