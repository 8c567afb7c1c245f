// Command bootstrap is hactl's bootstrap benchmark (make bench; never run in CI): in the lab, with the
// binaries built and the image cached, it measures the wall time of a 3-member and a 5-member
// bootstrap on fresh hosts, the no-op re-run, and the SSH commands run per host, and prints them next
// to the goals (3-member bootstrap < 10 s, no-op re-run < 3 s, <= ~15 commands per host). Figures are
// printed, not asserted.
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
	"time"

	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/report"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	runs := flag.Int("runs", 3, "repetitions of each measurement")
	keep := flag.Bool("keep", false, "leave the lab running afterwards")
	flag.Parse()
	if err := run(*hactl, *runs, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type sample struct {
	wall     time.Duration
	commands map[string]int
}

func bootstrapOnce(hactl, spec string) (sample, error) {
	start := time.Now()
	cmd := exec.Command(hactl, "bootstrap", "-f", spec, "-o", "json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("hactl bootstrap -f %s: %w\n%s", spec, err, errb.String())
	}
	wall := time.Since(start)
	var res report.Cluster
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return sample{}, err
	}
	s := sample{wall: wall, commands: map[string]int{}}
	for _, m := range res.Members {
		s.commands[m.Name] = m.Commands
	}
	return s, nil
}

func run(hactl string, runs int, keep bool) error {
	ctx := context.Background()
	hactl, _ = filepath.Abs(hactl)
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		return err
	}
	dir := filepath.Join(root, ".lab-bench")
	l, err := lab.Up(ctx, lab.Options{Members: 5, RepoRoot: root, Dir: dir, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		return err
	}
	if !keep {
		defer l.Down(ctx)
	}
	type row struct {
		name  string
		goal  time.Duration
		walls []time.Duration
		cmds  map[string]int
	}
	var rows []*row
	for _, members := range []int{3, 5} {
		hosts := []string{"cp-a", "cp-b", "cp-c"}
		if members == 5 {
			hosts = append(hosts, "etcd-d", "etcd-e")
		}
		fresh := &row{name: fmt.Sprintf("bootstrap %d members (fresh hosts)", members)}
		noop := &row{name: fmt.Sprintf("no-op re-run, %d members", members), goal: 3 * time.Second}
		if members == 3 {
			fresh.goal = 10 * time.Second
		}
		for i := 0; i < runs; i++ {
			if err := l.Recreate(ctx, hosts...); err != nil {
				return err
			}
			spec := l.SpecPath(members)
			os.RemoveAll(filepath.Join(dir, fmt.Sprintf("state-%d", members)))
			s, err := bootstrapOnce(hactl, spec)
			if err != nil {
				return err
			}
			fresh.walls, fresh.cmds = append(fresh.walls, s.wall), s.commands
			s, err = bootstrapOnce(hactl, spec)
			if err != nil {
				return err
			}
			noop.walls, noop.cmds = append(noop.walls, s.wall), s.commands
		}
		rows = append(rows, fresh, noop)
	}
	fmt.Println()
	fmt.Printf("%-36s %-28s %-10s %-8s %s\n", "measurement", "wall time (runs)", "goal", "ratio", "SSH commands per host")
	for _, r := range rows {
		var walls []string
		var best time.Duration
		for i, w := range r.walls {
			walls = append(walls, w.Round(10*time.Millisecond).String())
			if i == 0 || w < best {
				best = w
			}
		}
		goal, ratio := "-", "-"
		if r.goal > 0 {
			goal = r.goal.String()
			ratio = fmt.Sprintf("%.2f", float64(best)/float64(r.goal))
		}
		fmt.Printf("%-36s %-28s %-10s %-8s %v\n", r.name, fmt.Sprint(walls), goal, ratio, r.cmds)
	}
	fmt.Println("\nratio = best wall time / goal (below 1.00 meets the goal); command goal: <= ~15 per host")
	return nil
}
