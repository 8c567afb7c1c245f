//go:build e2e

package drille2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

// etcdHealthy reports why the etcd part of `hactl status` is not healthy ("" when it is). The lab
// has no kube-apiservers here, so HAProxy's backends are DOWN and status exits 3 for that alone.
func etcdHealthy(t *testing.T, spec string) string {
	t.Helper()
	r := suite.HactlQuiet(t, "status", "-f", spec, "-o", "json")
	var rep struct {
		Problems []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		return "status -o json is not JSON: " + r.String()
	}
	var etcdProblems []string
	for _, p := range rep.Problems {
		if !strings.HasPrefix(p, "load balancer: ") || strings.Contains(p, "VIP") || strings.Contains(p, "inactive") {
			etcdProblems = append(etcdProblems, p)
		}
	}
	return strings.Join(etcdProblems, "; ")
}

func waitEtcdHealthy(t *testing.T, spec string, within time.Duration) {
	t.Helper()
	harness.WaitFor(t, "cluster healthy", within, 2*time.Second, func() string { return etcdHealthy(t, spec) })
}

// runDrill runs a drill with --yes and --report and returns the report and the result.
func runDrill(t *testing.T, spec string, args ...string) (*drill.Report, harness.Result) {
	t.Helper()
	rp := filepath.Join(t.TempDir(), "drill.json")
	r := suite.Hactl(t, append(append([]string{"drill"}, args...), "-f", spec, "--yes", "--report", rp)...)
	raw, err := os.ReadFile(rp)
	if err != nil {
		return nil, r
	}
	rep := &drill.Report{}
	if err := json.Unmarshal(raw, rep); err != nil {
		t.Fatalf("--report is not JSON: %v", err)
	}
	return rep, r
}

// checkEtcdDrill asserts what every passed etcd drill must show.
func checkEtcdDrill(t *testing.T, rep *drill.Report, r harness.Result, iterations int) {
	t.Helper()
	if r.Code != 0 || rep == nil {
		t.Fatalf("drill: exit %d, want 0", r.Code)
	}
	if len(rep.Iterations) != iterations {
		t.Fatalf("%d iterations in the report, want %d", len(rep.Iterations), iterations)
	}
	if rep.LostWrites != 0 || rep.Verdict == "fail" {
		t.Fatalf("lost %d acknowledged writes, verdict %s: %v", rep.LostWrites, rep.Verdict, rep.Failures)
	}
	for _, it := range rep.Iterations {
		if it.Verification == nil || it.Verification.Acked == 0 || it.Verification.Lost != 0 || !it.Verification.OK() {
			t.Errorf("iteration %d: verification %+v: want acknowledged writes, all read back", it.N, it.Verification)
		}
		if it.RTOMs == nil || *it.RTOMs <= 0 {
			t.Errorf("iteration %d: no RTO measured", it.N)
		}
		if it.CatchUpMs == nil {
			t.Errorf("iteration %d: no catch-up measured", it.N)
		}
		if it.WriteP50Ms == nil || it.WriteP99Ms == nil || *it.WriteP99Ms < *it.WriteP50Ms {
			t.Errorf("iteration %d: write latency p50 %v p99 %v", it.N, it.WriteP50Ms, it.WriteP99Ms)
		}
		t.Logf("iteration %d: down %v, leader %s → %s, election %s, RTO %s, longest gap %s, catch-up %s, %d acked, %d lost",
			it.N, it.Targets, it.LeaderBefore, it.LeaderAfter, fmtp(it.ElectionMs), fmtp(it.RTOMs), fmtp(it.LongestGapMs), fmtp(it.CatchUpMs),
			it.Verification.Acked, it.Verification.Lost)
	}
	if rep.Settings.ElectionTimeoutMs != 1000 || rep.Settings.HeartbeatIntervalMs != 100 || rep.Settings.ResolutionMs > 20 {
		t.Errorf("settings %+v: want the spec's 100/1000 ms and a resolution <= 20 ms", rep.Settings)
	}
	if !strings.Contains(r.Stdout, "nothing was lost") {
		t.Errorf("the table does not say that nothing was lost:\n%s", r.Stdout)
	}
}

// checkKillLeader asserts a kill-leader report: a new leader was elected and it is not the old one.
func checkKillLeader(t *testing.T, rep *drill.Report, r harness.Result, iterations int) {
	t.Helper()
	checkEtcdDrill(t, rep, r, iterations)
	for _, it := range rep.Iterations {
		if it.ElectionMs == nil || it.LeaderAfter == "" || it.LeaderAfter == it.LeaderBefore || len(it.Targets) != 1 || it.Targets[0] != it.LeaderBefore {
			t.Errorf("iteration %d: targets %v, leader %s → %s, election %v: want the leader taken down and another elected",
				it.N, it.Targets, it.LeaderBefore, it.LeaderAfter, it.ElectionMs)
		}
	}
}

func fmtp(v *float64) string {
	if v == nil {
		return "-"
	}
	return (time.Duration(*v * float64(time.Millisecond))).Round(time.Millisecond).String()
}

// noLeftovers checks that no host carries a drill's iptables chain or marker and no journal is left.
func noLeftovers(t *testing.T, c *v1alpha1.Cluster) {
	t.Helper()
	for _, h := range c.Spec.Hosts {
		out, _ := suite.Lab.Exec(context.Background(), h.Name, "sh", "-c", "iptables -S 2>/dev/null | grep -c HACTL-DRILL; ls /run/hactl-drill 2>/dev/null | wc -l")
		if f := strings.Fields(out); len(f) != 2 || f[0] != "0" || f[1] != "0" {
			t.Errorf("%s: drill leftovers (iptables rules, marker files): %q", h.Name, out)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Spec.StateDir, "drill", "active.json")); err == nil {
		t.Errorf("the drill journal is still there")
	}
}

// bgDrill is a drill running in the background (startUntilHold).
type bgDrill struct {
	cmd  *exec.Cmd
	held chan struct{} // closed when stderr shows the hold
	done chan struct{} // closed once stderr is read to its end and the command has exited
	out  []string      // stderr's lines: read them only once done is closed
	err  error         // cmd.Wait's, once done is closed
}

// stderr is everything the drill wrote to stderr; call it only after it ended (wait).
func (d *bgDrill) stderr() string { return strings.Join(d.out, "\n") }

// wait returns the drill's exit error once it has ended; a drill still running after within is
// killed and the test fails (it hangs).
func (d *bgDrill) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-d.done:
		return d.err
	case <-time.After(within):
		d.cmd.Process.Kill()
		<-d.done
		t.Fatalf("the drill did not end within %s:\n%s", within, d.stderr())
		return nil
	}
}

// startUntilHold starts `hactl drill args... -f spec --yes --log-file ""` in the background and
// returns once the drill holds its fault. A drill still running when the test ends is killed.
func startUntilHold(t *testing.T, spec string, args ...string) *bgDrill {
	t.Helper()
	d := &bgDrill{held: make(chan struct{}), done: make(chan struct{})}
	d.cmd = suite.Command(t, append(append([]string{"drill"}, args...), "-f", spec, "--yes", "--log-file", "")...)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // the only writer of d.out and d.err
		var once sync.Once
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.out = append(d.out, sc.Text())
			if strings.Contains(sc.Text(), "drill/hold") {
				once.Do(func() { close(d.held) })
			}
		}
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	select {
	case <-d.held:
	case <-d.done:
		t.Fatalf("the drill ended before its hold (%v):\n%s", d.err, d.stderr())
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		t.Fatalf("the drill did not reach its hold:\n%s", d.stderr())
	}
	return d
}

// waitServing waits until the members on hosts (a quorum of c's members, the others down) serve
// the drill's workload: a linearizable read through them only (a leader among them) answers, and a
// later one at a higher revision (a write committed since).
func waitServing(t *testing.T, c *v1alpha1.Cluster, hosts ...string) {
	t.Helper()
	var eps []string
	for _, h := range hosts {
		eps = append(eps, suite.Endpoint(t, h))
	}
	cli := harness.EtcdClient(t, c.Spec.StateDir, eps...)
	var first int64
	harness.WaitFor(t, strings.Join(hosts, " and ")+" electing a leader and committing writes", 30*time.Second, 200*time.Millisecond, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := cli.Get(ctx, "/hactl-drill/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		switch {
		case err != nil:
			return "a linearizable read: " + err.Error()
		case first == 0:
			first = r.Header.Revision
			return fmt.Sprintf("serving at revision %d: no write committed since", first)
		case r.Header.Revision <= first:
			return fmt.Sprintf("still at revision %d: no write committed since", first)
		}
		return ""
	})
}

func TestDrills(t *testing.T) {
	c3 := suite.Spec(t, 3)
	spec := harness.WriteSpec(t, c3, "cluster.yaml")
	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow()
		}
	}

	step("bad input exits 2 before any host is contacted", func(t *testing.T) {
		// Every host's SSH port is closed (1): contacting any would fail with exit 1.
		c := suite.Spec(t, 3)
		c.Spec.SSH.Port = 1
		closed := harness.WriteSpec(t, c, "cluster.yaml")
		odd := suite.Spec(t, 3) // lb-b alone in az-d; cp-a and cp-b both in az-a (accepted by the spec)
		odd.Spec.SSH.Port = 1
		odd.Spec.Etcd.AcceptZoneQuorumLoss = true
		for i := range odd.Spec.Hosts {
			switch odd.Spec.Hosts[i].Name {
			case "lb-b":
				odd.Spec.Hosts[i].Zone = "az-d"
			case "cp-b":
				odd.Spec.Hosts[i].Zone = "az-a"
			}
		}
		oddSpec := harness.WriteSpec(t, odd, "cluster.yaml")
		cases := []struct {
			spec string
			args []string
			want string
		}{
			{closed, []string{"kill-leader", "--method", "teleport"}, `unknown method`},
			{closed, []string{"kill-leader", "--count", "0"}, "--count 0"},
			{closed, []string{"kill-leader", "--max-rto", "fast"}, `invalid argument "fast" for "--max-rto"`},
			{closed, []string{"kill-leader", "--method", "host"}, "needs --down-command and --up-command"},
			{closed, []string{"kill-leader", "--method", "host", "--down-command", "docker kill {{.Hostname}}", "--up-command", "x"}, "Hostname"},
			{closed, []string{"az-outage", "--zone", "az-x"}, "unknown zone"},
			{closed, []string{"az-outage"}, "--zone is required"},
			{oddSpec, []string{"az-outage", "--zone", "az-d"}, "holds no etcd member"},
			{oddSpec, []string{"az-outage", "--zone", "az-a"}, "add --expect-outage"},
			{closed, []string{"lb-failover", "--component", "nginx"}, "unknown component"},
			{closed, []string{"lb-failover"}, "--ca-file"},
			{closed, []string{"lb-failover", "--ca-file", os.TempDir()}, "--ca-file"},
			{closed, []string{"kill-leader", "--hold", "1s"}, "shorter than 2 x the election timeout"},
			{closed, []string{"kill-leader", "--hold", "0s"}, "--hold 0s"},
			{closed, []string{"kill-leader", "--report", "/nonexistent/dir/r.json"}, "its directory does not exist"},
		}
		for _, tc := range cases {
			r := suite.Hactl(t, append(append([]string{"drill"}, tc.args...), "-f", tc.spec, "--yes")...)
			if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("drill %v: exit %d, want 2 with %q in:\n%s", tc.args, r.Code, tc.want, r.Stderr)
			}
		}
		// Without --yes and without a terminal: exit 2, nothing done.
		if r := suite.Hactl(t, "drill", "kill-leader", "-f", closed); r.Code != 2 || !strings.Contains(r.Stderr, "--yes") {
			t.Errorf("drill without --yes: exit %d, want 2 asking for --yes", r.Code)
		}
	})

	step("bootstrap the 3-member cluster with its load balancer", func(t *testing.T) {
		suite.MustHactl(t, "bootstrap", "-f", spec)
		waitEtcdHealthy(t, spec, time.Minute)
	})

	step("a drill on an unhealthy cluster is refused", func(t *testing.T) {
		suite.ExecOn(t, "cp-c", "systemctl", "stop", "etcd")
		defer suite.ExecOn(t, "cp-c", "systemctl", "start", "etcd")
		r := suite.Hactl(t, "drill", "kill-leader", "-f", spec, "--yes")
		if r.Code != 3 || !strings.Contains(r.Stderr, "refused") || !strings.Contains(r.Stderr, "cp-c") {
			t.Errorf("drill with cp-c stopped: exit %d, want 3 refusing and naming cp-c", r.Code)
		}
		if out := suite.ExecOn(t, "cp-a", "systemctl", "is-active", "etcd"); strings.TrimSpace(out) != "active" {
			t.Errorf("a refused drill touched cp-a: etcd %s", out)
		}
		suite.ExecOn(t, "cp-c", "systemctl", "start", "etcd")
		waitEtcdHealthy(t, spec, time.Minute)
	})

	step("dry run prints the plan and touches nothing", func(t *testing.T) {
		r := suite.MustHactl(t, "drill", "kill-leader", "-f", spec, "--dry-run")
		if !strings.Contains(r.Stderr, "SIGKILL of etcd.service") || !strings.Contains(r.Stdout, "dry run") {
			t.Errorf("dry run does not show the plan")
		}
		noLeftovers(t, c3)
	})

	step("kill-leader by process", func(t *testing.T) {
		rep, r := runDrill(t, spec, "kill-leader", "--method", "process", "--hold", "4s")
		checkKillLeader(t, rep, r, 1)
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, time.Minute)
	})

	step("kill-leader by network: the partitioned leader steps down, no write acknowledged twice", func(t *testing.T) {
		rep, r := runDrill(t, spec, "kill-leader", "--method", "network", "--hold", "5s")
		checkKillLeader(t, rep, r, 1)
		it := rep.Iterations[0]
		if v := it.Verification; v.SplitBrain != 0 {
			t.Errorf("%d revisions acknowledged twice", v.SplitBrain)
		}
		if it.StepDownMs == nil {
			t.Errorf("the partitioned leader's step-down was not observed")
		} else {
			t.Logf("the partitioned leader %s stepped down %s after the partition", it.LeaderBefore, fmtp(it.StepDownMs))
		}
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, time.Minute)
	})

	step("kill-leader by host (docker kill / docker start from the operator's machine)", func(t *testing.T) {
		rep, r := runDrill(t, spec, "kill-leader", "--method", "host", "--hold", "4s",
			"--down-command", "docker kill "+lab.Prefix+"-{{.Host}}", "--up-command", "docker start "+lab.Prefix+"-{{.Host}}")
		checkKillLeader(t, rep, r, 1)
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, 2*time.Minute)
	})

	step("3 consecutive kill-leader drills lose no acknowledged write, with --max-rto", func(t *testing.T) {
		rep, r := runDrill(t, spec, "kill-leader", "--count", "3", "--hold", "3s", "--max-rto", "30s")
		checkKillLeader(t, rep, r, 3)
		if rep.Verdict != "pass" {
			t.Errorf("verdict %s, want pass", rep.Verdict)
		}
		if d, ok := rep.Summary["rtoMs"]; !ok || d.N != 3 || d.Min > d.Median || d.Median > d.Max {
			t.Errorf("summary rtoMs %+v", d)
		}
		// An impossible budget fails the verdict (exit 3) and still puts everything back.
		rep, r = runDrill(t, spec, "kill-leader", "--hold", "3s", "--max-rto", "1ms")
		if r.Code != 3 || rep == nil || rep.Verdict != "fail" || rep.LostWrites != 0 {
			t.Errorf("--max-rto 1ms: exit %d, want 3 with verdict fail and nothing lost", r.Code)
		}
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, time.Minute)
	})

	for _, zone := range []string{"az-a", "az-b", "az-c"} {
		step("az-outage "+zone, func(t *testing.T) {
			rep, r := runDrill(t, spec, "az-outage", "--zone", zone, "--hold", "5s")
			checkEtcdDrill(t, rep, r, 1)
			p := rep.Prediction
			if p == nil || !p.QuorumHolds || p.Survivors != 2 || p.Total != 3 {
				t.Fatalf("prediction %+v: want quorum holding with 2 of 3", p)
			}
			it := rep.Iterations[0]
			if it.Observed == nil || !it.Observed.QuorumHeld || it.Observed.LeaderChanged != p.LeaderInZone || it.Observed.VIPMoved != p.VIPMustMove {
				t.Errorf("observed %+v, predicted %+v", it.Observed, p)
			}
			if !strings.Contains(r.Stderr, "losing "+zone) {
				t.Errorf("the plan does not say what losing %s does", zone)
			}
			noLeftovers(t, c3)
			waitEtcdHealthy(t, spec, time.Minute)
		})
	}

	step("az-outage of a zone holding 2 of 3 members with --expect-outage: nothing acknowledged while it is down, recovery from its return", func(t *testing.T) {
		// The same cluster described with cp-b in az-a: losing az-a (cp-a, cp-b, lb-a) loses quorum.
		odd := suite.Spec(t, 3)
		odd.Spec.Etcd.AcceptZoneQuorumLoss = true
		for i := range odd.Spec.Hosts {
			if odd.Spec.Hosts[i].Name == "cp-b" {
				odd.Spec.Hosts[i].Zone = "az-a"
			}
		}
		oddSpec := harness.WriteSpec(t, odd, "cluster.yaml")
		rep, r := runDrill(t, oddSpec, "az-outage", "--zone", "az-a", "--expect-outage", "--hold", "5s")
		checkEtcdDrill(t, rep, r, 1)
		if p := rep.Prediction; p == nil || p.QuorumHolds || p.Survivors != 1 || p.Total != 3 {
			t.Fatalf("prediction %+v: want quorum lost with 1 of 3", p)
		}
		it := rep.Iterations[0]
		if it.Observed == nil || it.Observed.QuorumHeld || it.WritesAckedDuringFault != 0 || !it.RecoveryFromPutBack || it.RTOMs == nil {
			t.Errorf("observed %+v, %d writes acknowledged during the outage, recovery from the put-back %v, RTO measured %v; want quorum lost, 0, true, true",
				it.Observed, it.WritesAckedDuringFault, it.RecoveryFromPutBack, it.RTOMs != nil)
		} else {
			t.Logf("az-a back: first acknowledged write %.0f ms after the put-back; %d writes sent during the outage, %d acknowledged", *it.RTOMs, it.SentDuringHold, it.AckedDuringHold)
		}
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, time.Minute)
	})

	step("a drill killed with SIGKILL leaves leftovers: the next drill refuses, cleanup puts them back", func(t *testing.T) {
		d := startUntilHold(t, spec, "kill-leader", "--method", "network", "--hold", "60s")
		journal := filepath.Join(c3.Spec.StateDir, "drill", "active.json")
		if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		d.wait(t, time.Minute)
		t.Logf("killed hactl during the hold:\n%s", d.stderr())
		if _, err := os.Stat(journal); err != nil {
			t.Fatalf("no journal after SIGKILL: %v", err)
		}
		r := suite.Hactl(t, "drill", "kill-leader", "-f", spec, "--yes")
		if r.Code != 3 || !strings.Contains(r.Stderr, "hactl drill cleanup") || !strings.Contains(r.Stderr, "HACTL-DRILL") {
			t.Errorf("drill over leftovers: exit %d, want 3 naming the iptables chain and `hactl drill cleanup`", r.Code)
		}
		suite.MustHactl(t, "drill", "cleanup", "-f", spec, "--yes")
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, time.Minute)
		if r := suite.MustHactl(t, "drill", "cleanup", "-f", spec, "--yes"); !strings.Contains(r.Stdout, "nothing to clean up") {
			t.Errorf("a second cleanup found something")
		}
	})

	step("Ctrl-C during an az-outage by process puts every unit back and says so", func(t *testing.T) {
		rp := filepath.Join(t.TempDir(), "drill.json")
		d := startUntilHold(t, spec, "az-outage", "--zone", "az-b", "--method", "process", "--hold", "60s", "--report", rp)
		waitServing(t, c3, "cp-a", "cp-c") // the survivors elect and serve: something to measure
		// While held: az-b's etcd and its LB host's units are down.
		out, _ := suite.Lab.Exec(context.Background(), "cp-b", "systemctl", "is-active", "etcd")
		if st := strings.TrimSpace(out); st != "inactive" && st != "failed" {
			t.Errorf("cp-b's etcd during the hold: %q, want inactive or failed (killed, held stopped)", out)
		}
		if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := d.wait(t, 2*time.Minute) // a put-back, a catch-up, the read-back: not a 60 s hold
		t.Logf("interrupted hactl during the hold:\n%s", d.stderr())
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(d.stderr(), "everything was put back") {
			t.Errorf("exit %v, want 1 saying everything was put back", err)
		}
		var rep drill.Report
		err = harness.ReadJSON(rp, &rep)
		if err != nil || rep.Verdict != "error" || len(rep.Iterations) != 1 || rep.LostWrites != 0 {
			t.Errorf("report after Ctrl-C (%v): verdict %q, %d iterations, %d lost; want error, 1, 0", err, rep.Verdict, len(rep.Iterations), rep.LostWrites)
		}
		for h, units := range map[string][]string{"cp-b": {"etcd"}, "lb-b": {"haproxy", "keepalived"}} {
			out, _ := suite.Lab.Exec(context.Background(), h, append([]string{"systemctl", "is-active"}, units...)...)
			if strings.Count(out, "active") != len(units) || strings.Contains(out, "inactive") {
				t.Errorf("%s after Ctrl-C: %q, want %v active", h, out, units)
			}
		}
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, time.Minute)
	})

	step("two drills at once: the second is refused and touches nothing", func(t *testing.T) {
		d := startUntilHold(t, spec, "kill-leader", "--hold", "8s")
		r := suite.Hactl(t, "drill", "kill-leader", "-f", spec, "--yes", "--method", "network")
		if r.Code != 3 || !strings.Contains(r.Stderr, "another drill") {
			t.Errorf("second drill: exit %d, want 3 refusing because another drill runs", r.Code)
		}
		if err := d.wait(t, 2*time.Minute); err != nil {
			t.Errorf("the first drill failed (the second must not undo its fault): %v\n%s", err, d.stderr())
		}
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, time.Minute)
	})

	step("an --up-command that fails: what is left broken is named; after a manual start cleanup finishes", func(t *testing.T) {
		r := suite.Hactl(t, "drill", "kill-leader", "-f", spec, "--yes", "--method", "host", "--hold", "3s",
			"--down-command", "docker kill "+lab.Prefix+"-{{.Host}}", "--up-command", "false {{.Host}}")
		if r.Code != 1 || !strings.Contains(r.Stderr, "NOT PUT BACK") || !strings.Contains(r.Stderr, "may still be down") {
			t.Fatalf("exit %d, want 1 naming the host left down", r.Code)
		}
		// Which host: the journal says.
		raw, err := os.ReadFile(filepath.Join(c3.Spec.StateDir, "drill", "active.json"))
		if err != nil {
			t.Fatalf("no journal after a failed put-back: %v", err)
		}
		var j struct {
			Targets []struct{ Host string } `json:"targets"`
		}
		if err := json.Unmarshal(raw, &j); err != nil || len(j.Targets) != 1 {
			t.Fatalf("journal %s: %v", raw, err)
		}
		down := j.Targets[0].Host
		if err := suite.Lab.Start(context.Background(), down); err != nil {
			t.Fatal(err)
		}
		r = suite.MustHactl(t, "drill", "cleanup", "-f", spec, "--yes")
		if strings.Contains(r.Stderr, "false "+down) && strings.Contains(r.Stderr, "running here") {
			t.Errorf("cleanup ran the failing --up-command although %s is back", down)
		}
		noLeftovers(t, c3)
		waitEtcdHealthy(t, spec, 2*time.Minute)
	})

	step("kill-leader on the 5-member cluster", func(t *testing.T) {
		ctx := context.Background()
		if err := suite.Lab.Recreate(ctx, "cp-a", "cp-b", "cp-c", "etcd-d", "etcd-e", "lb-a", "lb-b"); err != nil {
			t.Fatal(err)
		}
		c5 := suite.Spec(t, 5)
		spec5 := harness.WriteSpec(t, c5, "cluster.yaml")
		suite.MustHactl(t, "bootstrap", "-f", spec5)
		waitEtcdHealthy(t, spec5, time.Minute)
		rep, r := runDrill(t, spec5, "kill-leader", "--hold", "4s")
		checkKillLeader(t, rep, r, 1)
		noLeftovers(t, c5)
	})
}
