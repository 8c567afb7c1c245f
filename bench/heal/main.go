// Command heal is hactl-operator's self-healing benchmark (make bench; never run in CI), in the
// lab: etcd, the load balancer, 3 control planes and 3 workers bootstrapped by hactl, the spare
// spare-c in spec.etcd.spares, the operator deployed with --auto-replace --grace-period (-grace,
// default 30s). Each of -rounds rounds (a fresh lab each: a heal uses the spare up) runs the
// drills' writer (50 writes/s), kills cp-c's container (its host is gone) and measures, side by
// side with the goals, never asserted:
//
//   - time to full strength: from the kill until three voting members are healthy again, spare-c
//     among them (goal ≤ gracePeriod + 60 s);
//   - write unavailability: the longest gap between acknowledged writes over the round (goal: none
//     when a follower is replaced: with -follower, the default, leadership is moved off cp-c before
//     the kill when it leads; -follower=false kills cp-c whatever its role, and the round says
//     whether it led), the writes that failed, and the acknowledged writes lost (must be 0);
//   - the heal's own duration, from status.healing's start to its record in status.heals.
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
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	rounds := flag.Int("rounds", 3, "heals, each on a fresh lab")
	grace := flag.Duration("grace", 30*time.Second, "the operator's --grace-period")
	keep := flag.Bool("keep", false, "leave the last lab running")
	follower := flag.Bool("follower", true, "move leadership off cp-c before the kill when it leads (the goal's case: a follower replaced)")
	flag.Parse()
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		kit.Fail("heal", err)
	}
	h, _ := filepath.Abs(*hactl)
	var full, heal, gaps []float64
	failed, lost := 0, 0
	for i := range *rounds {
		r, err := round(root, h, *grace, *follower, *keep && i == *rounds-1)
		if err != nil {
			kit.Fail("heal", fmt.Errorf("round %d: %w", i+1, err))
		}
		role := "a follower"
		if r.led {
			role = "the leader"
		}
		fmt.Printf("round %d: cp-c %s when killed; full strength %.1f s after the kill, the heal itself %.1f s, longest write gap %.0f ms, %d writes failed, %d acknowledged lost\n",
			i+1, role, r.full.Seconds(), r.heal.Seconds(), float64(r.gap.Milliseconds()), r.failed, r.lost)
		full, heal, gaps = append(full, r.full.Seconds()), append(heal, r.heal.Seconds()), append(gaps, float64(r.gap.Milliseconds()))
		failed, lost = failed+r.failed, lost+r.lost
	}
	goal := grace.Seconds() + 60
	fmt.Printf("\nheal of a lost member (grace %s), %d rounds: full strength p50 %.1f s, max %.1f s (goal <= grace + 60 s = %.0f s: max %.2f×); the heal itself p50 %.1f s; longest write gap p50 %.0f ms, max %.0f ms; %d writes failed, %d acknowledged lost (goal 0)\n",
		grace, len(full), kit.Pct(full, 50), kit.Pct(full, 100), goal, kit.Pct(full, 100)/goal, kit.Pct(heal, 50), kit.Pct(gaps, 50), kit.Pct(gaps, 100), failed, lost)
}

type result struct {
	full, heal, gap time.Duration
	failed, lost    int
	led             bool // cp-c led when it was killed
}

func round(root, hactl string, grace time.Duration, follower, keep bool) (result, error) {
	var r result
	ctx := context.Background()
	l, err := kit.UpLab(ctx, ".lab-bench-heal", keep, lab.Options{Members: 3, Workers: true, Spares: true, RepoRoot: root, Logf: logf})
	if err != nil {
		return r, err
	}
	defer l.Teardown(ctx)
	dir := l.Dir()
	base := l.SpecPath(3)
	c, err := lab.ReadSpec(base)
	if err != nil {
		return r, err
	}
	sp, err := l.Host(lab.SpareHosts[0])
	if err != nil {
		return r, err
	}
	c.Spec.Etcd.Spares = []v1alpha1.Spare{{Name: sp.Name, Address: sp.Address, Zone: sp.Zone}}
	spec, err := lab.WriteSpec(c, dir, "cluster-heal.yaml")
	if err != nil {
		return r, err
	}
	for _, args := range [][]string{
		{"bootstrap", "-f", spec},
		{"kubeconfig", "-f", spec, "--out", l.Kubeconfig()},
		{"operator", "deploy", "-f", spec, "--image-archive", filepath.Join(root, "bin", "hactl-operator-image.tar"), "--no-backups", "--auto-replace", "--grace-period", grace.String()},
	} {
		if out, err := exec.Command(hactl, args...).CombinedOutput(); err != nil {
			return r, fmt.Errorf("hactl %s: %w\n%s", args[0], err, out)
		}
	}
	pki := filepath.Join(c.Spec.StateDir, "pki")
	tls := etcd.TLSFiles{CA: filepath.Join(pki, "ca.crt"), Cert: filepath.Join(pki, "hactl-etcd-client.crt"), Key: filepath.Join(pki, "hactl-etcd-client.key")}
	var endpoints []string
	for _, h := range c.EtcdHosts() {
		endpoints = append(endpoints, "https://"+h.Address+":2379")
	}
	endpoints = append(endpoints, "https://"+sp.Address+":2379") // answers once healed
	cli, err := etcd.NewClient(ctx, endpoints, tls, 5*time.Second)
	if err != nil {
		return r, err
	}
	defer cli.Close()
	w, err := workload.Start(ctx, workload.Config{Client: cli, Prefix: "/hactl-bench/heal/", Rate: 50})
	if err != nil {
		return r, err
	}
	time.Sleep(5 * time.Second)
	victim, err := l.Host("cp-c")
	if err != nil {
		w.Stop()
		return r, err
	}
	victimURL := "https://" + victim.Address + ":2379"
	if r.led, err = leads(ctx, cli, victimURL); err == nil && r.led && follower {
		if err = moveLeaderOff(ctx, victimURL, tls); err == nil {
			r.led, err = leads(ctx, cli, victimURL)
		}
	}
	if err != nil {
		w.Stop()
		return r, fmt.Errorf("cp-c's role: %w", err)
	}
	killed := time.Now()
	if out, err := exec.Command("docker", "kill", victim.Container).CombinedOutput(); err != nil {
		w.Stop()
		return r, fmt.Errorf("docker kill: %w: %s", err, out)
	}
	deadline := killed.Add(grace + 5*time.Minute)
	for {
		if fullStrength(ctx, cli, sp.Name) {
			r.full = time.Since(killed)
			break
		}
		if time.Now().After(deadline) {
			w.Stop()
			return r, fmt.Errorf("not at full strength %s after the kill", time.Since(killed).Round(time.Second))
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	rec := w.Stop()
	v, err := workload.Verify(ctx, cli, rec)
	if err != nil {
		return r, err
	}
	st := rec.Stats(time.Time{})
	r.gap, r.failed, r.lost = st.LongestGap, st.Failed, v.Lost
	out, err := l.Kubectl(ctx, "get", "etcdcluster", "-n", "hactl-system", c.Metadata.Name, "-o", "json")
	if err != nil {
		return r, err
	}
	var ec hactlv1.EtcdCluster
	if err := json.Unmarshal([]byte(out), &ec); err != nil {
		return r, err
	}
	if n := len(ec.Status.Heals); n > 0 {
		h := ec.Status.Heals[n-1]
		r.heal = h.FinishedAt.Sub(h.StartedAt.Time)
	}
	return r, nil
}

// leads reports whether the member at url is the leader.
func leads(ctx context.Context, cli *clientv3.Client, url string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cli.Status(cctx, url)
	if err != nil {
		return false, err
	}
	return st.Leader == st.Header.MemberId, nil
}

// moveLeaderOff asks the leader at url (etcd answers MoveLeader only through the leader's own
// endpoint) to hand leadership to another voter, and waits until one leads.
func moveLeaderOff(ctx context.Context, url string, tls etcd.TLSFiles) error {
	cli, err := etcd.NewClient(ctx, []string{url}, tls, 5*time.Second)
	if err != nil {
		return err
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := cli.Status(cctx, url)
	if err != nil {
		return err
	}
	ml, err := cli.MemberList(cctx)
	if err != nil {
		return err
	}
	for _, m := range ml.Members {
		if m.ID != st.Header.MemberId && !m.IsLearner {
			if _, err := cli.MoveLeader(cctx, m.ID); err != nil {
				return fmt.Errorf("move leader to %s: %w", m.Name, err)
			}
			for {
				if led, err := leads(cctx, cli, url); err == nil && !led {
					return nil
				}
				select {
				case <-cctx.Done():
					return fmt.Errorf("cp-c still leads: %w", cctx.Err())
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}
	return fmt.Errorf("no other voter to move leadership to")
}

// fullStrength: three voting members, none a learner, spare among them, each answering status.
func fullStrength(ctx context.Context, cli *clientv3.Client, spare string) bool {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ml, err := cli.MemberList(cctx)
	if err != nil || len(ml.Members) != 3 {
		return false
	}
	var names []string
	for _, m := range ml.Members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			return false
		}
		if _, err := cli.Status(cctx, m.ClientURLs[0]); err != nil {
			return false
		}
		names = append(names, m.Name)
	}
	return slices.Contains(names, spare) && !slices.Contains(names, "cp-c")
}

func logf(f string, a ...any) {
	if !strings.HasPrefix(f, "lab: debug") {
		fmt.Fprintf(os.Stderr, f+"\n", a...)
	}
}
