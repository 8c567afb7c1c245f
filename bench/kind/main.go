// Command kind is the kind benchmark (make bench; never run in CI). It prints, never asserts:
//
//   - a cold `make kind-image`: the node image removed, then built again (debootstrap, kind's base
//     steps, the images preloaded, docker import);
//   - a warm `make kind-up`: the cluster (1 control plane, 3 workers) created from the cached image
//     until every node is Ready, -runs times;
//   - hactl-scheduler's and hactl-operator's Lease takeover (`hactl drill kill-leader --target
//     lease/… --count -runs`: the holder's pod deleted, until another identity holds the Lease) in kind
//     and in the lab's kubeadm cluster (bootstrapped by hactl on cp-a/b/c and w-a/b/c), side by side
//     with their ratio. Both run the same way: Deployments applied through a kubeconfig (3 scheduler
//     replicas, 2 operator replicas), the images loaded as each cluster takes them (kind load
//     image-archive; ctr import on the lab's nodes, as kind does it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/drill/lease"
	"github.com/hactl/hactl/e2e/lab"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	runs := flag.Int("runs", 5, "kind-up repetitions and takeovers per Lease and cluster")
	cold := flag.Bool("cold", true, "remove the kind node image first and time its build")
	flag.Parse()
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		kit.Fail("kind", err)
	}
	h, _ := filepath.Abs(*hactl)
	if err := run(root, h, *runs, *cold); err != nil {
		kit.Fail("kind", err)
	}
}

// takeovers runs the Lease drill n times on target through kubeconfig and returns the takeover
// times in ms.
func takeovers(hactl, kubeconfig, target string, n int) ([]float64, error) {
	out, err := kit.HactlOutput(hactl, "drill", "kill-leader", "--kubeconfig", kubeconfig, "--target", target, "--count", fmt.Sprint(n), "--yes", "-o", "json")
	var rep lease.Report
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		return nil, fmt.Errorf("drill %s: %v (%w)", target, jerr, err)
	}
	var ms []float64
	for _, it := range rep.Iter {
		if it.TakeoverMs != nil {
			ms = append(ms, *it.TakeoverMs)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("drill %s: no takeover measured (%s: %v)", target, rep.Result, rep.Failures)
	}
	return ms, nil
}

func run(root, hactl string, runs int, cold bool) error {
	ctx := context.Background()
	opts := lab.Options{Logf: kit.Logf}
	in, err := lab.KindInputsFor(ctx, root)
	if err != nil {
		return err
	}
	ref, err := lab.KindNodeImageRef(in)
	if err != nil {
		return err
	}
	var imageBuild time.Duration
	if cold {
		_ = exec.Command("docker", "rmi", "-f", ref).Run()
		start := time.Now()
		if _, err := lab.EnsureKindNodeImage(ctx, opts, in); err != nil {
			return err
		}
		imageBuild = time.Since(start)
	} else if _, err := lab.EnsureKindNodeImage(ctx, opts, in); err != nil {
		return err
	}

	l, err := kit.UpLab(ctx, ".lab-bench-kind", false, lab.Options{Members: 3, Workers: true, ObjectStore: true, RepoRoot: root})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	dir := l.Dir()
	if _, err := l.ObjectStoreEnv(); err != nil {
		return err
	}
	spec := l.SpecPath(3)
	for _, args := range [][]string{{"bootstrap", "-f", spec}, {"kubeconfig", "-f", spec, "--out", l.Kubeconfig()}} {
		if _, err := kit.HactlOutput(hactl, args...); err != nil {
			return fmt.Errorf("hactl %s: %w", args[0], err)
		}
	}

	var ups []float64
	for i := 0; i < runs; i++ {
		start := time.Now()
		if err := lab.KindUp(ctx, opts, in, root, dir, ref); err != nil {
			return err
		}
		ups = append(ups, time.Since(start).Seconds())
	}
	kindKC := lab.KindKubeconfig(dir)
	sched := filepath.Join(root, "bin", "hactl-scheduler-image.tar")
	oper := filepath.Join(root, "bin", "hactl-operator-image.tar")

	// The same deployments in both clusters, one cluster at a time (the operator's location is one
	// record in the state dir).
	type result struct{ scheduler, operator []float64 }
	measure := func(kubeconfig string, load func(archive string) error) (result, error) {
		var r result
		for _, a := range []string{sched, oper} {
			if err := load(a); err != nil {
				return r, err
			}
		}
		for _, args := range [][]string{
			{"scheduler", "deploy", "--kubeconfig", kubeconfig, "--image-archive", sched, "--replicas", "3", "--preferred-zone", "az-a=100"},
			{"operator", "deploy", "-f", spec, "--kubeconfig", kubeconfig, "--image-archive", oper, "--no-backups"},
		} {
			if _, err := kit.HactlOutput(hactl, args...); err != nil {
				return r, fmt.Errorf("hactl %s %s: %w", args[0], args[1], err)
			}
		}
		var err error
		if r.scheduler, err = takeovers(hactl, kubeconfig, "lease/kube-system/hactl-scheduler", runs); err != nil {
			return r, err
		}
		if r.operator, err = takeovers(hactl, kubeconfig, "lease/hactl-system/hactl-operator", runs); err != nil {
			return r, err
		}
		for _, args := range [][]string{
			{"operator", "remove", "-f", spec, "--kubeconfig", kubeconfig, "--yes"},
			{"scheduler", "remove", "--kubeconfig", kubeconfig, "--yes"},
		} {
			if _, err := kit.HactlOutput(hactl, args...); err != nil {
				return r, fmt.Errorf("hactl %s remove: %w", args[0], err)
			}
		}
		return r, nil
	}
	kindEnv := append(os.Environ(), lab.KindEnviron(root)...)
	inKind, err := measure(kindKC, func(archive string) error {
		cmd := exec.Command(filepath.Join(in.KindBin, "kind"), "load", "image-archive", archive, "--name", lab.KindCluster)
		cmd.Env, cmd.Stdout, cmd.Stderr = kindEnv, os.Stderr, os.Stderr
		return cmd.Run()
	})
	if err != nil {
		return fmt.Errorf("kind: %w", err)
	}
	if err := lab.KindDown(ctx, opts, root, dir); err != nil {
		return err
	}
	inLab, err := measure(l.Kubeconfig(), func(archive string) error {
		for _, n := range l.KubeNodes() {
			f, err := os.Open(archive)
			if err != nil {
				return err
			}
			cmd := exec.Command("docker", "exec", "-i", n.Container, "ctr", "-n", "k8s.io", "images", "import", "-")
			cmd.Stdin, cmd.Stderr = f, os.Stderr
			err = cmd.Run()
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: ctr import: %w", n.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the lab's kubeadm cluster: %w", err)
	}

	fmt.Println()
	if cold {
		fmt.Printf("cold make kind-image (debootstrap, kind's base steps, %d images preloaded, docker import): %.1f s\n", len(in.Images)+1, imageBuild.Seconds())
	}
	fmt.Printf("warm make kind-up (cached image; 1 control plane + 3 workers, all Ready), %d runs: p50 %.1f s, max %.1f s\n", len(ups), kit.Pct(ups, 50), kit.Pct(ups, 100))
	fmt.Printf("\nLease takeover after the holder's pod is deleted (%d runs each)\n", runs)
	fmt.Printf("%-34s %16s %16s %8s\n", "", "kind", "kubeadm (lab)", "ratio")
	row := func(name string, k, b []float64, p float64) {
		fmt.Printf("%-34s %13.0f ms %13.0f ms %7.2f×\n", fmt.Sprintf("%s p%.0f", name, p), kit.Pct(k, p), kit.Pct(b, p), kit.Pct(k, p)/kit.Pct(b, p))
	}
	for _, p := range []float64{50, 100} {
		row("hactl-scheduler", inKind.scheduler, inLab.scheduler, p)
	}
	for _, p := range []float64{50, 100} {
		row("hactl-operator", inKind.operator, inLab.operator, p)
	}
	return nil
}
