// Command restore is hactl's disaster-recovery benchmark (make bench; never run in CI). In the lab (3
// etcd members, the VIP and a kubeadm control plane bootstrapped by hactl, MinIO for spec.backup) it
// installs full snapshots with delta snapshots (`backup schedule --deltas`, deltaEvery the default
// 30 s), and for each DB size (-sizes, MiB; Pod-shaped JSON objects of about 1 KiB under
// /bench/fill/, beside Kubernetes' own keys) takes a full snapshot and runs the real `hactl drill
// restore` with readyz through the VIP, printing from its report: RTO (first acknowledged write, and
// readyz 200 through the VIP), RPO, the writes lost and the steps' times.
//
// Goals (issue 18): RTO ≤ 2 min, RPO ≤ deltaEvery + 5 s. Figures are printed, not asserted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/specload"
)

const mib = 1 << 20

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	sizes := flag.String("sizes", "256,1024", "DB sizes, MiB, ascending")
	warmup := flag.Duration("warmup", 45*time.Second, "drill restore --warmup: the workload's writes before the disaster (deltas are cut meanwhile)")
	keep := flag.Bool("keep", false, "leave the lab running afterwards")
	flag.Parse()
	var mibs []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench/restore: -sizes %q: want MiB numbers like 256,1024\n", *sizes)
			os.Exit(2)
		}
		mibs = append(mibs, n)
	}
	if err := run(*hactl, mibs, *warmup, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench/restore:", err)
		os.Exit(1)
	}
}

func run(hactl string, mibs []int, warmup time.Duration, keep bool) error {
	ctx := context.Background()
	hactl, _ = filepath.Abs(hactl)
	l, err := kit.UpLab(ctx, ".lab-bench-restore", keep, lab.Options{Members: 3, Kubernetes: true, ObjectStore: true})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	dir := l.Dir()
	if _, err := l.ObjectStoreEnv(); err != nil {
		return err
	}
	spec := l.SpecPath(3)
	if _, err := kit.HactlOutput(hactl, "bootstrap", "-f", spec); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	kubeCA := filepath.Join(dir, "kubernetes-ca.crt")
	ca, err := l.Exec(ctx, "cp-a", "cat", "/etc/kubernetes/pki/ca.crt")
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeCA, []byte(ca), 0o644); err != nil {
		return err
	}
	if _, err := kit.HactlOutput(hactl, "backup", "schedule", "-f", spec, "--every", "30m", "--deltas", "--keep-last", "10", "--yes"); err != nil {
		return fmt.Errorf("backup schedule --deltas: %w", err)
	}
	c, _, err := specload.Load(spec)
	if err != nil {
		return err
	}
	type result struct {
		size int64
		rep  *drill.Report
	}
	var results []result
	for _, m := range mibs {
		size, err := fill(ctx, c, int64(m)*mib)
		if err != nil {
			return err
		}
		if _, err := kit.HactlOutput(hactl, "backup", "now", "-f", spec); err != nil {
			return fmt.Errorf("backup now: %w", err)
		}
		report := filepath.Join(dir, fmt.Sprintf("drill-restore-%d.json", m))
		_, err = kit.HactlOutput(hactl, "drill", "restore", "-f", spec, "--ca-file", kubeCA, "--warmup", warmup.String(), "--report", report, "--yes")
		var rep drill.Report
		raw, rerr := os.ReadFile(report)
		if rerr != nil {
			return fmt.Errorf("drill restore (%d MiB): %w; no report: %w", m, err, rerr)
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			return err
		}
		results = append(results, result{size, &rep})
	}

	fmt.Printf("\nhactl drill restore benchmark (lab: 3 etcd members, kubeadm control plane behind the VIP, MinIO; full snapshot + deltas every %s; warmup %s)\n",
		c.Spec.Backup.DeltaEvery.Duration, warmup)
	fmt.Printf("%-9s %-8s %-7s %-9s %-9s %-11s %-13s %-9s %-8s %-10s %s\n", "DB", "verdict", "deltas", "fetch", "restore", "RTO etcd", "RTO readyz", "RPO", "lost", "snapshot", "goals: RTO ≤ 2 min, RPO ≤ deltaEvery + 5 s")
	goalRPO := float64((c.Spec.Backup.DeltaEvery.Duration + 5*time.Second) / time.Millisecond)
	for _, r := range results {
		if len(r.rep.Iterations) == 0 || r.rep.Iterations[0].Restore == nil {
			fmt.Printf("%-9s %s: %s\n", fmt.Sprintf("%d MiB", r.size/mib), r.rep.Verdict, r.rep.Error)
			continue
		}
		it := r.rep.Iterations[0]
		x := it.Restore
		rto := ms(it.RTOMs)
		rz := ms(x.ReadyzRTOMs)
		worst := max(rto, rz)
		fmt.Printf("%-9s %-8s %-7d %-9s %-9s %-11s %-13s %-9s %-8d %-10s RTO %s (%.2f of the goal), RPO %s (%.2f of the goal)\n",
			fmt.Sprintf("%d MiB", r.size/mib), r.rep.Verdict, x.Deltas, fmtMs(x.FetchMs), fmtMs(x.RestoreMs), fmtMs(rto), fmtMs(rz), fmtMs(x.RPOMs)+" ("+x.RPOFrom+")",
			x.LostWrites, fmtMs(x.SnapshotAgeMs), kit.Verdict(worst <= 120000 && worst > 0), worst/120000, kit.Verdict(x.RPOMs <= goalRPO), x.RPOMs/goalRPO)
	}
	return nil
}

func ms(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

func fmtMs(v float64) string {
	if v >= 10000 {
		return fmt.Sprintf("%.1fs", v/1000)
	}
	return fmt.Sprintf("%.0fms", v)
}

// fill writes Pod-shaped JSON objects under /bench/fill/ (transactions of 128 puts, 4 writers)
// until the largest member's DB is at least target bytes, and returns that size.
func fill(ctx context.Context, c *v1alpha1.Cluster, target int64) (int64, error) {
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return 0, err
	}
	eps := etcd.ClientURLs(members)
	cli, err := etcd.NewClient(ctx, eps, etcd.HactlClientTLS(c), 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	start := time.Now()
	for round := 0; ; round++ {
		var size int64
		for _, ep := range eps {
			st, err := cli.Status(ctx, ep)
			if err != nil {
				return 0, err
			}
			size = max(size, st.DbSize)
		}
		if size >= target {
			kit.Logf("DB at %d MiB (filled in %s)", size/mib, time.Since(start).Round(time.Second))
			return size, nil
		}
		errs := make(chan error, 4)
		for w := range 4 {
			go func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				for j := range 50 {
					var ops []clientv3.Op
					for i := range 128 {
						ops = append(ops, clientv3.OpPut(fmt.Sprintf("/bench/fill/%d-%d-%d-%d-%x", round, w, j, i, rng.Uint32()),
							fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-%x","namespace":"ns-%d","uid":"%x-%x","labels":{"app":"web-%d"}},"spec":{"containers":[{"name":"app","image":"registry.example.com/team/app:v1.%d.%d","resources":{"requests":{"cpu":"%dm","memory":"%dMi"}},"env":[{"name":"CONFIG","value":"%x"}]}],"nodeName":"node-%d"},"status":{"phase":"Running","podIP":"10.%d.%d.%d"}}`,
								rng.Uint32(), rng.IntN(50), rng.Uint64(), rng.Uint64(), rng.IntN(40), rng.IntN(20), rng.IntN(100), 100*(1+rng.IntN(20)), 64*(1+rng.IntN(32)), rng.Uint64(), rng.IntN(100), rng.IntN(250), rng.IntN(255), rng.IntN(255))))
					}
					if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				return 0, err
			}
		}
	}
}
