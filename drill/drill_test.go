package drill

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/internal/testcert"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
)

// spec returns a valid cluster: members (name → zone) with role etcd, lbs (name → zone) with role lb.
func spec(t *testing.T, members, lbs [][2]string) *v1alpha1.Cluster {
	t.Helper()
	c := &v1alpha1.Cluster{Metadata: v1alpha1.ObjectMeta{Name: "t"}}
	c.Spec.StateDir = t.TempDir()
	c.Spec.Etcd.ClientPort, c.Spec.Etcd.PeerPort = 2379, 2380
	c.Spec.Etcd.HeartbeatInterval.Duration, c.Spec.Etcd.ElectionTimeout.Duration = 100*time.Millisecond, time.Second
	for i, m := range members {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: m[0], Zone: m[1], Address: "10.0.0." + string(rune('1'+i)), Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	}
	for i, l := range lbs {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: l[0], Zone: l[1], Address: "10.0.1." + string(rune('1'+i)), Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
	}
	if len(lbs) > 0 {
		c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "10.0.0.100/24"}
	}
	return c
}

var three = [][2]string{{"a", "az-a"}, {"b", "az-b"}, {"c", "az-c"}}

func TestPredictZone(t *testing.T) {
	c := spec(t, three, [][2]string{{"lb-a", "az-a"}, {"lb-b", "az-b"}})
	p, err := PredictZone(c, "az-a")
	if err != nil {
		t.Fatal(err)
	}
	p.SetRuntime("a", "lb-a")
	if !p.QuorumHolds || p.Survivors != 2 || p.Quorum != 2 || !p.LeaderInZone || !p.VIPMustMove {
		t.Fatalf("prediction %+v", p)
	}
	got := strings.Join(p.Sentences(), "\n")
	for _, want := range []string{"losing az-a (a) leaves 2 of 3 members, quorum is 2: quorum holds", "must elect a new leader", "the VIP must move to lb-b"} {
		if !strings.Contains(got, want) {
			t.Errorf("sentences lack %q:\n%s", want, got)
		}
	}
	p, _ = PredictZone(c, "az-c")
	p.SetRuntime("a", "lb-a")
	if p.LeaderInZone || p.VIPMustMove || !strings.Contains(strings.Join(p.Sentences(), "\n"), "must stay leader") {
		t.Errorf("az-c: %+v %v", p, p.Sentences())
	}

	// Two of three members in one zone: losing it loses quorum.
	two := spec(t, [][2]string{{"a", "az-a"}, {"b", "az-a"}, {"c", "az-c"}}, [][2]string{{"lb-d", "az-d"}})
	p, _ = PredictZone(two, "az-a")
	if p.QuorumHolds || !strings.Contains(p.Sentences()[0], "QUORUM IS LOST") {
		t.Errorf("az-a of a 2+1 topology: %+v", p)
	}
	var ie *InputError
	if _, err := PredictZone(two, "az-d"); !errors.As(err, &ie) || !strings.Contains(err.Error(), "holds no etcd member") {
		t.Errorf("zone with only an LB host: %v", err)
	}
	if _, err := PredictZone(two, "az-x"); !errors.As(err, &ie) || !strings.Contains(err.Error(), "unknown zone") {
		t.Errorf("unknown zone: %v", err)
	}
}

func TestValidate(t *testing.T) {
	c := spec(t, three, [][2]string{{"lb-a", "az-a"}, {"lb-b", "az-b"}})
	down, _ := fault.ParseHostCommand("--down-command", "echo down {{.Host}}")
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"count", Options{Kind: KillLeader, Method: MethodProcess, Count: 0}, "--count 0"},
		{"negative hold", Options{Kind: KillLeader, Method: MethodProcess, Count: 1, Hold: -time.Second}, "--hold"},
		{"negative max-rto", Options{Kind: KillLeader, Method: MethodProcess, Count: 1, MaxRTO: -time.Second}, "--max-rto"},
		{"rate", Options{Kind: KillLeader, Method: MethodProcess, Count: 1, Rate: 5000}, "--rate"},
		{"host without commands", Options{Kind: KillLeader, Method: MethodHost, Count: 1, Down: down}, "--up-command"},
		{"commands without host", Options{Kind: KillLeader, Method: MethodProcess, Count: 1, Down: down}, "are for --method host"},
		{"no zone", Options{Kind: AZOutage, Method: MethodNetwork, Count: 1}, "--zone is required"},
		{"expect-outage without one", Options{Kind: AZOutage, Method: MethodNetwork, Count: 1, Zone: "az-a", ExpectOutage: true}, "there is no outage to expect"},
		{"lb without CA", Options{Kind: LBFailover, Component: ComponentHAProxy, Count: 1}, "--ca-file"},
		{"lb with missing CA", Options{Kind: LBFailover, Component: ComponentHAProxy, Count: 1, CAFile: "/nonexistent/ca.crt"}, "no such file"},
		{"lb with a CA that is no PEM", Options{Kind: LBFailover, Component: ComponentHAProxy, Count: 1, CAFile: notPEM}, "no PEM certificate"},
		{"hold shorter than an election", Options{Kind: KillLeader, Method: MethodProcess, Count: 1, Hold: 2 * time.Second}, "shorter than 2 x the election timeout (1s) + 1s = 3s"},
	}
	for _, tc := range cases {
		o := tc.o
		o.Cluster = c
		err := o.Validate()
		if !IsInput(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an InputError with %q", tc.name, err, tc.want)
		}
	}
	ok := Options{Cluster: c, Kind: KillLeader, Method: MethodProcess, Count: 1}
	if err := ok.Validate(); err != nil || ok.Hold != DefaultHold || ok.Rate != DefaultRate || ok.RequestTimeout != DefaultRequestTimeout {
		t.Errorf("defaults: %v %+v", err, ok)
	}
	noLB := spec(t, three, nil)
	o := Options{Cluster: noLB, Kind: LBFailover, Component: ComponentHAProxy, Count: 1}
	if err := o.Validate(); !IsInput(err) || !strings.Contains(err.Error(), "spec.loadBalancer") {
		t.Errorf("lb-failover without a load balancer: %v", err)
	}
	if _, err := ParseMethod("--method", "teleport"); !IsInput(err) || !strings.Contains(err.Error(), "process, host, network") {
		t.Errorf("ParseMethod: %v", err)
	}
	if _, err := ParseComponent("--component", "nginx"); !IsInput(err) {
		t.Errorf("ParseComponent: %v", err)
	}
	// hactl's load balancer: the default component is haproxy; kube-apiserver and --backend are
	// for an external one.
	ca := filepath.Join(t.TempDir(), "ca.crt")
	testcert.WriteCA(t, ca)
	o = Options{Cluster: c, Kind: LBFailover, Count: 1, CAFile: ca, Hold: 10 * time.Second}
	_ = o.Validate() // the test spec is not defaulted: lb.Plan refuses its advertInterval
	if o.Component != ComponentHAProxy {
		t.Errorf("managed default component %q", o.Component)
	}
	for _, bad := range []Options{{Component: ComponentAPIServer}, {Backend: "a"}} {
		bad.Cluster, bad.Kind, bad.Count, bad.CAFile = c, LBFailover, 1, ca
		if err := bad.Validate(); !IsInput(err) || !strings.Contains(err.Error(), "spec.loadBalancer.external") {
			t.Errorf("managed with %+v: %v", bad, err)
		}
	}
}

// TestBackendOut: a backend counts as taken out of an external load balancer when requests stopped
// failing at least minQuietBeforePut before the put-back.
func TestBackendOut(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// Round robin over three backends, one dead: every third request fails until failUntil.
	samples := func(failUntil time.Duration) []probe.Sample {
		var out []probe.Sample
		for i := 0; i < 500; i++ { // 10 s at 20 ms
			sent := t0.Add(time.Duration(i) * 20 * time.Millisecond)
			ok := i%3 != 0 || sent.Sub(t0) >= failUntil
			out = append(out, probe.Sample{Sent: sent, Done: sent.Add(5 * time.Millisecond), OK: ok})
		}
		return out
	}
	hold := 10 * time.Second
	st := probe.Outage(samples(2*time.Second), t0)
	if !backendOut(st, hold) || st.SettledAfter < 1900*time.Millisecond || st.SettledAfter > 2100*time.Millisecond {
		t.Errorf("taken out after 2s: out %v, settled after %s", backendOut(st, hold), st.SettledAfter)
	}
	if st := probe.Outage(samples(9500*time.Millisecond), t0); backendOut(st, hold) {
		t.Errorf("failing until 0.5s before the put-back counts as taken out (settled after %s)", st.SettledAfter)
	}
	if st := probe.Outage(samples(0), t0); backendOut(st, hold) || !st.NoFailure {
		t.Errorf("no failure: out %v", backendOut(st, hold))
	}
}

// TestValidateExternal: lb-failover through spec.loadBalancer.external cuts a control-plane host
// (--backend, default the first) off the user's load balancer.
func TestValidateExternal(t *testing.T) {
	c := spec(t, three, nil)
	for i := range c.Spec.Hosts {
		c.Spec.Hosts[i].Roles = append(c.Spec.Hosts[i].Roles, v1alpha1.RoleControlPlane)
	}
	c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{External: &v1alpha1.ExternalLoadBalancer{Address: "api.example.com", Port: 8443}, APIServerPort: 6443}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	testcert.WriteCA(t, ca)
	o := Options{Cluster: c, Kind: LBFailover, Count: 1, CAFile: ca}
	if err := o.Validate(); err != nil || o.Component != ComponentAPIServer || o.Backend != "a" || o.Hold != DefaultHold {
		t.Fatalf("defaults: %v, component %q backend %q hold %s", err, o.Component, o.Backend, o.Hold)
	}
	r := newBackendCut(&env{o: &o, c: c, report: &Report{ID: "x"}, hosts: newHosts(c, nil)})
	if got := r.readyzURL(); got != "https://api.example.com:8443/readyz" {
		t.Errorf("readyz URL %s", got)
	}
	if f := r.faults.faultFor(c.Spec.Hosts[0]); len(f.DropPorts) != 1 || f.DropPorts[0] != 6443 || len(f.StopUnits) != 0 {
		t.Errorf("fault %+v: want port 6443 dropped, nothing stopped", f)
	}
	if plan := strings.Join(r.externalPlan(), "\n"); !strings.Contains(plan, "cut backend a off your load balancer (spec.loadBalancer.external api.example.com:8443)") {
		t.Errorf("plan:\n%s", plan)
	}
	if hs := drillHosts(c); len(hs) != 3 {
		t.Errorf("drill hosts %v", hs)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Component: ComponentHAProxy}, "--component haproxy: spec.loadBalancer.external is set"},
		{Options{Backend: "nope"}, `--backend "nope": not a control-plane host of the spec (they are a, b, c)`},
		{Options{CAFile: "-"}, "--ca-file"},
		{Options{Hold: time.Second}, "--hold 1s: shorter than the minimum for a load balancer's health check = 2s"},
	} {
		o := tc.o
		o.Cluster, o.Kind, o.Count = c, LBFailover, 1
		if o.CAFile == "-" {
			o.CAFile = ""
		} else {
			o.CAFile = ca
		}
		if err := o.Validate(); !IsInput(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an InputError with %q", tc.o, err, tc.want)
		}
	}
	one := spec(t, three, nil)
	one.Spec.Hosts[0].Roles = append(one.Spec.Hosts[0].Roles, v1alpha1.RoleControlPlane)
	one.Spec.LoadBalancer = c.Spec.LoadBalancer
	o = Options{Cluster: one, Kind: LBFailover, Count: 1, CAFile: ca}
	if err := o.Validate(); !IsInput(err) || !strings.Contains(err.Error(), "1 control-plane host(s)") {
		t.Errorf("one backend: %v", err)
	}
}

func TestDistribution(t *testing.T) {
	d := distribution([]float64{30, 10, 20, 40})
	if d != (Distribution{N: 4, Min: 10, Median: 25, Max: 40}) {
		t.Errorf("even: %+v", d)
	}
	if d := distribution([]float64{5, 1, 3}); d.Median != 3 || d.Min != 1 || d.Max != 5 {
		t.Errorf("odd: %+v", d)
	}
	if d := distribution(nil); d.N != 0 {
		t.Errorf("empty: %+v", d)
	}
}

func TestFaultInstant(t *testing.T) {
	sent := time.Now()
	done := sent.Add(300 * time.Millisecond)
	wall := sent.Round(0)
	ar := fault.ApplyResult{FaultStart: wall.Add(210 * time.Millisecond), FaultEnd: wall.Add(215 * time.Millisecond)}
	t0, unc := faultInstant(sent, done, ar, false)
	if got := t0.Sub(sent); got != 215*time.Millisecond || unc != 5*time.Millisecond {
		t.Errorf("t0 sent+%s, uncertainty %s; want the window's end sent+215ms, 5ms", got, unc)
	}
	// A host clock outside [sent, done] (skew), or no times: t0 is when the command returned.
	for _, ar := range []fault.ApplyResult{{}, {FaultStart: wall.Add(-time.Hour), FaultEnd: wall.Add(-time.Hour)}} {
		if t0, unc := faultInstant(sent, done, ar, false); !t0.Equal(done) || unc != 300*time.Millisecond {
			t.Errorf("skewed or missing host times: t0 sent+%s, uncertainty %s", t0.Sub(sent), unc)
		}
	}
	// A stop takes effect when it starts: t0 is the window's start.
	if t0, unc := faultInstant(sent, done, ar, true); t0.Sub(sent) != 210*time.Millisecond || unc != 5*time.Millisecond {
		t.Errorf("atStart: t0 sent+%s, uncertainty %s; want sent+210ms, 5ms", t0.Sub(sent), unc)
	}
}

func TestReportVerdict(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	r := &Report{MaxRTOMs: 2000, Iterations: []Iteration{
		{N: 1, RTOMs: v(1500), Verification: &workload.Verification{Acked: 100}},
		{N: 2, RTOMs: v(2500), Verification: &workload.Verification{Acked: 100}},
	}}
	r.summarize()
	r.decide()
	if r.Verdict != "fail" || len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "iteration 2: RTO 2500ms over --max-rto 2000ms") {
		t.Errorf("verdict %s %v", r.Verdict, r.Failures)
	}
	if d := r.Summary["rtoMs"]; d.N != 2 || d.Median != 2000 {
		t.Errorf("summary %+v", d)
	}
	r.Iterations[1].RTOMs = v(1800)
	r.decide()
	if r.Verdict != "pass" {
		t.Errorf("within budget: %s %v", r.Verdict, r.Failures)
	}
	r.MaxRTOMs = 0
	r.Iterations[0].Verification.Lost = 3
	r.Iterations[0].Failures = []string{"3 acknowledged writes lost"}
	r.decide()
	if r.Verdict != "fail" || r.LostWrites != 3 {
		t.Errorf("lost writes: %s %d", r.Verdict, r.LostWrites)
	}
	var b strings.Builder
	r.Print(&b)
	if !strings.Contains(b.String(), "3 OF 200 ACKNOWLEDGED WRITES WERE LOST") || !strings.Contains(b.String(), "verdict: FAIL") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestJournal(t *testing.T) {
	dir := t.TempDir()
	if j, err := readJournal(dir); j != nil || err != nil {
		t.Fatalf("no journal: %v %v", j, err)
	}
	j := &Journal{ID: "x", PID: 7, Kind: KillLeader, Method: MethodHost, Targets: []JournalTarget{{Host: "a", Fault: "down", UpCommand: "start a"}}}
	if err := writeJournal(dir, j); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "drill", "active.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal file: %v %v", fi, err)
	}
	got, err := readJournal(dir)
	if err != nil || got.Targets[0].UpCommand != "start a" {
		t.Fatalf("read back: %+v %v", got, err)
	}
	reasons := leftoverReasons(got, nil)
	if len(reasons) != 2 || !strings.Contains(reasons[1], "brought back by running: start a") {
		t.Errorf("reasons %v", reasons)
	}
	if err := removeJournal(dir); err != nil {
		t.Fatal(err)
	}
	if err := removeJournal(dir); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}

func TestNewLeaderAt(t *testing.T) {
	t0 := time.Now()
	obs := []Observation{
		{Member: "b", At: t0.Add(-time.Millisecond), OK: true, Leader: 1},
		{Member: "a", At: t0.Add(10 * time.Millisecond), OK: true, Leader: 1}, // the old leader itself (excluded)
		{Member: "b", At: t0.Add(20 * time.Millisecond), OK: false},
		{Member: "b", At: t0.Add(900 * time.Millisecond), OK: true, Leader: 0},
		{Member: "c", At: t0.Add(1200 * time.Millisecond), OK: true, Leader: 3, Term: 5},
	}
	o, ok := newLeaderAt(obs, t0, 1, map[string]bool{"a": true})
	if !ok || o.Member != "c" || o.At.Sub(t0) != 1200*time.Millisecond {
		t.Errorf("new leader: %+v %v", o, ok)
	}
	if !leaderChanged(obs, t0, 1) || leaderChanged(obs[:4], t0, 1) {
		t.Errorf("leaderChanged")
	}
}

func TestLBObservedAfter(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	o := &lbObserved{events: []probe.VIPEvent{
		{Host: "lb-a", Held: true, At: at(-5000)},
		{Host: "lb-b", Held: false, At: at(-5000)},
		{Host: "lb-b", Held: true, At: at(3000)}, // cut off: claims it on its own side
		{Host: "lb-c", Held: false, At: at(-5000)},
	}, samples: []probe.Sample{{Sent: at(-20), OK: true}, {Sent: at(20), OK: false}, {Sent: at(40), OK: true}}}
	to, moved, failed, notes := o.after(t0, map[string]bool{"lb-b": true})
	if to != "lb-a" || moved != nil || failed != 1 || len(notes) != 1 || !strings.Contains(notes[0], "lb-b (cut off) claimed the VIP") {
		t.Errorf("cut-off claim: to %s moved %v failed %d notes %v; want the VIP staying on lb-a and a note", to, moved, failed, notes)
	}
	// Without a cut, lb-b taking it is the move.
	to, moved, _, notes = o.after(t0, nil)
	if to != "lb-b" || moved == nil || *moved != 3000 || len(notes) != 0 {
		t.Errorf("move: to %s moved %v notes %v", to, moved, notes)
	}
	if got, ok := settledAt(o.events, "lb-b", at(1000)); !ok || !got.Equal(at(3000)) {
		t.Errorf("settledAt: %v %v", got, ok)
	}
}

func TestMasterDown(t *testing.T) {
	// RFC 5798 §6.1: 3 x 1 s + (256 - 100) x 1 s / 256 = 3.609375 s for a backup of priority 100.
	c := &lb.Config{AdvertInterval: time.Second, Nodes: []lb.Node{{Name: "a", Priority: 150}, {Name: "b", Priority: 100}}}
	if got := masterDown(c); got != 3609375*time.Microsecond {
		t.Errorf("masterDown = %s", got)
	}
	if got := masterDown(&lb.Config{AdvertInterval: time.Second, Nodes: c.Nodes[:1]}); got != 0 {
		t.Errorf("one node: %s", got)
	}
}

func TestDualVIP(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := []probe.VIPEvent{
		{Host: "lb-a", Held: true, At: at(-1000)},
		{Host: "lb-b", Held: false, At: at(-1000)},
		{Host: "lb-b", Held: true, At: at(3000)},   // lb-a killed with SIGKILL keeps the address
		{Host: "lb-a", Held: false, At: at(11000)}, // put back: keepalived starts, drops it
	}
	if d, who := dualVIP(ev, nil, t0); d != 8*time.Second || strings.Join(who, ",") != "lb-a,lb-b" {
		t.Errorf("dualVIP = %s %v, want 8s on lb-a and lb-b", d, who)
	}
	if d, _ := dualVIP(ev, map[string]bool{"lb-a": true}, t0); d != 0 {
		t.Errorf("lb-a cut off: %s, want 0", d)
	}
}

func TestRefusedAsNotClean(t *testing.T) {
	err := provision.ForEach(context.Background(), []string{"a", "b", "c"}, 0, func(s string) string { return s }, func(_ context.Context, s string) error {
		switch s {
		case "a":
			return &provision.CommandError{Host: "a", Step: "drill/fault", ExitCode: fault.ExitNotClean, Err: errors.New("exit 3")}
		case "b":
			return &provision.CommandError{Host: "b", Step: "drill/fault", ExitCode: 1, Err: errors.New("exit 1")}
		}
		return nil
	})
	if !refusedAsNotClean(err, "a") || refusedAsNotClean(err, "b") || refusedAsNotClean(err, "c") || refusedAsNotClean(nil, "a") {
		t.Errorf("refusedAsNotClean: only a refused because another drill's fault is there: %v", err)
	}
}

func TestFailedSince(t *testing.T) {
	t0 := time.Now()
	s := func(off time.Duration, ok bool, err string) probe.Sample {
		return probe.Sample{Sent: t0.Add(off), Done: t0.Add(off + time.Millisecond), OK: ok, Err: err}
	}
	samples := []probe.Sample{
		s(-40*time.Millisecond, false, "before t0: not counted"),
		s(0, false, "connection refused"),
		s(20*time.Millisecond, true, ""),
		s(40*time.Millisecond, false, "i/o timeout"),
	}
	if got, want := failedSince(samples, t0), "2 failed requests; first: connection refused; last: i/o timeout"; got != want {
		t.Errorf("failedSince = %q, want %q", got, want)
	}
	if got, want := failedSince(samples[3:], t0), "1 failed request: i/o timeout"; got != want {
		t.Errorf("failedSince = %q, want %q", got, want)
	}
	if got := failedSince(samples[:1], t0); got != "no failed request" {
		t.Errorf("failedSince before t0 only = %q", got)
	}
}

func TestSplitReadyz(t *testing.T) {
	t0 := time.Now()
	tPut := t0.Add(8 * time.Second)
	// every 20 ms from 1 s before t0 to 2 s after tPut; fail reports whether the sample sent at
	// offset off (from t0) fails.
	samples := func(fail func(off time.Duration) bool) []probe.Sample {
		var ss []probe.Sample
		for off := -time.Second; off < 10*time.Second; off += 20 * time.Millisecond {
			s := probe.Sample{Sent: t0.Add(off), Done: t0.Add(off + 5*time.Millisecond), OK: !fail(off)}
			if !s.OK {
				s.Err = "connect: no route to host"
			}
			ss = append(ss, s)
		}
		return ss
	}
	between := func(a, b time.Duration) func(time.Duration) bool {
		return func(off time.Duration) bool { return off >= a && off < b }
	}

	// The handover was seamless; the VIP went back (preemption) while the put-back ran: that is
	// the failback, not an outage that never ended (seen in CI).
	rs := splitReadyz(samples(between(8*time.Second+400*time.Millisecond, 8*time.Second+700*time.Millisecond)), t0, tPut)
	if rs.failed != 0 || rs.rto == nil || *rs.rto != 0 || rs.failback == nil || *rs.failback < 300 || *rs.failback > 340 {
		t.Errorf("failback only: %+v, want 0 failed, RTO 0, failback ~320 ms", rs)
	}
	// A request in flight when the put-back started fails with it: neither outage nor failback.
	inFlight := samples(func(time.Duration) bool { return false })
	inFlight = append(inFlight, probe.Sample{Sent: tPut.Add(-10 * time.Millisecond), Done: tPut.Add(200 * time.Millisecond), Err: "i/o timeout"})
	if rs := splitReadyz(inFlight, t0, tPut); rs.failed != 0 || rs.rto == nil || *rs.rto != 0 || rs.failback != nil {
		t.Errorf("in flight at the put-back: %+v, want 0 failed, RTO 0, no failback", rs)
	}
	// An outage from 450 ms to 500 ms: RTO at the first OK sample's Done.
	rs = splitReadyz(samples(between(440*time.Millisecond, 500*time.Millisecond)), t0, tPut)
	if rs.failed != 3 || rs.rto == nil || *rs.rto != 505 || rs.failback != nil {
		t.Errorf("outage: %+v, want 3 failed, RTO 505 ms, no failback", rs)
	}
	// Never recovered before the put-back, recovered after it: no RTO, and why.
	rs = splitReadyz(samples(between(time.Second, 8*time.Second+100*time.Millisecond)), t0, tPut)
	if rs.rto != nil || !strings.Contains(rs.why, "350 failed requests: connect: no route to host") || rs.failback == nil {
		t.Errorf("no recovery: %+v", rs)
	}
}

// TestDecideRestore: a restore drill fails on an RPO over --max-rpo, on readyz through the VIP back
// after --max-rto, and passes within both; the writes it lost by design fail nothing.
func TestDecideRestore(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rep := func(rto, readyz, rpo float64) *Report {
		x := &RestoreFigures{RPOMs: rpo, RPOFrom: "workload", LostWrites: 40, Verification: &workload.RestoreVerification{LostBefore: 40}}
		if readyz > 0 {
			x.ReadyzRTOMs = f(readyz)
		}
		return &Report{Drill: Restore, MaxRTOMs: 120000, MaxRPOMs: 35000, Iterations: []Iteration{{N: 1, RTOMs: f(rto), Restore: x}}}
	}
	for _, tc := range []struct {
		name             string
		rto, readyz, rpo float64
		want             string
	}{
		{"within both", 15000, 17000, 12000, ""},
		{"RPO over", 15000, 17000, 40000, "RPO 40.00s over --max-rpo 35.00s"},
		{"readyz over", 15000, 130000, 12000, "readyz through the VIP back after 130.00s, over --max-rto"},
		{"etcd over", 125000, 0, 12000, "RTO 125.00s over --max-rto"},
	} {
		r := rep(tc.rto, tc.readyz, tc.rpo)
		r.decide()
		switch {
		case tc.want == "" && (r.Verdict != "pass" || len(r.Failures) != 0):
			t.Errorf("%s: verdict %s %v, want pass", tc.name, r.Verdict, r.Failures)
		case tc.want != "" && (r.Verdict != "fail" || len(r.Failures) != 1 || !strings.Contains(r.Failures[0], tc.want)):
			t.Errorf("%s: verdict %s %v, want fail with %q", tc.name, r.Verdict, r.Failures, tc.want)
		}
	}
}

// fakeRestorer is a Restorer that only has to exist for Validate.
type fakeRestorer struct{}

func (fakeRestorer) Newest(context.Context) (*SnapshotRef, error)  { return nil, nil }
func (fakeRestorer) Preflight(context.Context, *SnapshotRef) error { return nil }
func (fakeRestorer) Restore(context.Context) (*RestoreRun, error)  { return nil, errors.New("not here") }

// TestValidateOnto: --onto must name other hosts (by name and by address), its own state dir, etcd
// members and no Kubernetes; --keep-fenced needs --onto; the drill-restore flags are refused elsewhere.
func TestValidateOnto(t *testing.T) {
	old := spec(t, three, nil)
	old.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "10.0.0.100/24"}
	onto := func(mod func(*v1alpha1.Cluster)) *v1alpha1.Cluster {
		c := spec(t, [][2]string{{"d", "az-a"}, {"e", "az-b"}, {"f", "az-c"}}, nil)
		for i := range c.Spec.Hosts {
			c.Spec.Hosts[i].Address = "10.0.2." + string(rune('1'+i))
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"same host name", Options{Onto: onto(func(c *v1alpha1.Cluster) { c.Spec.Hosts[1].Name = "b" })}, "spec.hosts[1] (b, 10.0.2.2) is also host b"},
		{"same address", Options{Onto: onto(func(c *v1alpha1.Cluster) { c.Spec.Hosts[2].Address = "10.0.0.1" })}, "spec.hosts[2] (f, 10.0.0.1) is also host a (10.0.0.1)"},
		{"same state dir", Options{Onto: onto(func(c *v1alpha1.Cluster) { c.Spec.StateDir = old.Spec.StateDir })}, "is the drilled cluster's own"},
		{"kubernetes", Options{Onto: onto(func(c *v1alpha1.Cluster) { c.Spec.Kubernetes = &v1alpha1.Kubernetes{} })}, "remove spec.kubernetes"},
		{"no etcd host", Options{Onto: onto(func(c *v1alpha1.Cluster) {
			for i := range c.Spec.Hosts {
				c.Spec.Hosts[i].Roles = []v1alpha1.Role{v1alpha1.RoleLB}
			}
		})}, "no host with role etcd"},
		{"keep-fenced alone", Options{KeepFenced: true}, "--keep-fenced"},
		{"same VIP", Options{Onto: onto(func(c *v1alpha1.Cluster) {
			c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "10.0.0.100/24", VirtualRouterID: 52}
		})}, "is cluster t's VIP too"},
		{"same VRID on the subnet", Options{Onto: onto(func(c *v1alpha1.Cluster) {
			c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "10.0.0.101/24"}
		})}, "virtualRouterID 0 is cluster t's too, on the same subnet 10.0.0.0/24"},
	}
	for _, tc := range cases {
		o := tc.o
		o.Cluster, o.Kind, o.Count, o.Restorer, o.OntoFile = old, Restore, 1, fakeRestorer{}, "dr.yaml"
		err := o.Validate()
		if !IsInput(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an InputError with %q", tc.name, err, tc.want)
		}
	}
	good := Options{Cluster: old, Kind: Restore, Count: 1, Restorer: fakeRestorer{}, Onto: onto(func(c *v1alpha1.Cluster) {
		c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "10.0.2.100/24"} // same router ID, another segment
	}), OntoFile: "dr.yaml", KeepFenced: true}
	if err := good.Validate(); err != nil {
		t.Errorf("a valid --onto: %v", err)
	}
	other := Options{Cluster: old, Kind: KillLeader, Method: MethodProcess, Count: 1, Onto: onto(nil)}
	if err := other.Validate(); !IsInput(err) || !strings.Contains(err.Error(), "are for drill restore") {
		t.Errorf("--onto on kill-leader: %v", err)
	}
}

// TestFenceCommand: the fence is valid shell, written atomically, and its drop-in asserts a path
// that never exists (every start of etcd fails) and says how to unfence.
func TestFenceCommand(t *testing.T) {
	cmd := fenceCommand("20261206-031500-abcd", "dr")
	if out, err := exec.Command("sh", "-n", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s\n%s", err, out, cmd)
	}
	// Run it with the drop-in's directory in a temp dir and without systemd, and read the drop-in.
	dir := t.TempDir()
	local := strings.ReplaceAll(cmd, path.Dir(FenceDropIn), dir)
	local = strings.ReplaceAll(local, "systemctl daemon-reload", "true")
	if out, err := exec.Command("sh", "-c", local).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, local)
	}
	raw, err := os.ReadFile(filepath.Join(dir, path.Base(FenceDropIn)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, path.Base(FenceDropIn)+".tmp")); !os.IsNotExist(err) {
		t.Errorf("temp file left: %v", err)
	}
	for _, want := range []string{"[Unit]\nAssertPathExists=/nonexistent/hactl-fenced-by-drill-20261206-031500-abcd\n", "restored onto cluster dr", "To unfence: rm " + filepath.Join(dir, path.Base(FenceDropIn))} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("drop-in lacks %q:\n%s", want, raw)
		}
	}
	if !strings.Contains(cmd, "mv ") || !strings.HasSuffix(cmd, "systemctl daemon-reload") {
		t.Errorf("not temp + rename, then daemon-reload:\n%s", cmd)
	}
}
