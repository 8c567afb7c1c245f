package drill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// env is the plumbing every drill kind shares: the options, the SSH connections, etcd's TLS
// files and client URLs, the load balancer's plan and the report. The kinds receive it; run owns
// the lock and the journal is written through it (faulter).
type env struct {
	o      *Options
	p      *ui.Printer
	c      *v1alpha1.Cluster
	hosts  *hosts
	files  etcd.TLSFiles
	urls   map[string]string // member name → client URL
	report *Report
	lbPlan *lb.Config
	// ontoDial routes etcd connections to the --onto cluster (through its bastion), nil for direct.
	ontoDial etcd.Option
}

// newID returns a drill ID: UTC time and 4 random hex digits, e.g. 20261201-051144-a3f9.
func newID() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// Run validates the options, opens the SSH dialer (unless Options.Dialer is set), refuses on
// leftovers or an unhealthy cluster, shows the plan, asks for confirmation, runs the iterations,
// writes the report to Options.Report (when set) and returns it. The returned error is an
// *InputError (exit 2), a *RefusedError or *VerdictError (exit 3; the report is complete), a
// *NotRestoredError, or another runtime error (exit 1), joined with the error of writing the report
// file. The report is non-nil once the plan exists. o is not modified beyond Validate's defaults.
func Run(ctx context.Context, o *Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cp := *o
	o = &cp
	d, dial, closeDialer, err := dialers(o.Cluster, o.Dialer, o.EtcdDial, o.Prompt)
	if err != nil {
		return nil, err
	}
	defer closeDialer()
	o.Dialer, o.EtcdDial = d, dial
	rep, err := run(ctx, o)
	if rep != nil && o.Report != "" {
		if werr := rep.WriteFile(o.Report); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return rep, err
}

// dialers returns d and dial when d is set; else an SSH dialer opened from the spec
// (provision.FromSpec, asking prompt for secrets) and, when it goes through a bastion, an etcd
// option routing etcd connections through it. closeFn closes what dialers opened. Errors are
// provision.FromSpec's (keys, known_hosts, secrets).
func dialers(c *v1alpha1.Cluster, d *provision.Dialer, dial etcd.Option, prompt provision.Prompter) (_ *provision.Dialer, _ etcd.Option, closeFn func(), _ error) {
	if d != nil {
		return d, dial, func() {}, nil
	}
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: prompt})
	if err != nil {
		return nil, nil, nil, err
	}
	if d.HasBastion() {
		dial = etcd.WithDialer(d.DialTCP)
	}
	return d, dial, func() { d.Close() }, nil
}

// newEnv opens what every kind shares: the SSH connections, the --onto cluster's dialer, etcd's TLS
// files and member URLs, and the load balancer's plan. closeFn closes what it opened. Errors:
// dialers' (prefixed with --onto), the spec's members, lb.Plan's.
func newEnv(o *Options) (_ *env, closeFn func(), _ error) {
	e := &env{o: o, p: o.Printer, c: o.Cluster, hosts: newHosts(o.Cluster, o.Dialer)}
	closeOnto := func() {}
	closeFn = func() {
		e.hosts.close()
		closeOnto()
	}
	if o.Onto != nil {
		_, dial, c, err := dialers(o.Onto, nil, nil, o.Prompt)
		if err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("--onto %s: %w", o.OntoFile, err)
		}
		closeOnto = c
		e.ontoDial = dial
	}
	e.files = etcd.HactlClientTLS(e.c)
	members, err := etcd.MembersFromSpec(e.c)
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	e.urls = map[string]string{}
	for _, m := range members {
		e.urls[m.Name] = m.ClientURL()
	}
	if e.c.ManagedLB() != nil {
		if e.lbPlan, err = lb.Plan(e.c); err != nil {
			closeFn()
			return nil, nil, err
		}
	}
	return e, closeFn, nil
}

// run is Run once the options are valid and the dialer is open.
func run(ctx context.Context, o *Options) (*Report, error) {
	start := time.Now()
	unlock, err := lock(o.Cluster.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	e, closeEnv, err := newEnv(o)
	if err != nil {
		return nil, err
	}
	defer closeEnv()
	k := kindOf(o, e)
	e.report = &Report{ID: newID(), Cluster: e.c.Metadata.Name, Drill: o.Kind, Started: start.UTC(), Settings: e.settings()}
	k.header(e.report)
	e.report.Zone = o.Zone
	if o.MaxRTO > 0 {
		e.report.MaxRTOMs = ms(o.MaxRTO)
	}
	if o.MaxRPO > 0 {
		e.report.MaxRPOMs = ms(o.MaxRPO)
	}
	defer func() { e.report.DurationMs = ms(time.Since(start)) }()

	pre, err := e.preflight(ctx, k.vipHolder())
	if err != nil {
		return nil, err
	}
	if err := k.preflight(ctx, pre); err != nil {
		return nil, err
	}
	e.report.Plan = k.plan(pre)
	e.p.Infof("drill/plan")
	for _, l := range e.report.Plan {
		e.p.Infof("  %s", l)
	}
	if o.DryRun {
		e.report.DryRun = true
		e.report.Verdict = "dry-run"
		return e.report, nil
	}
	if o.Confirm != nil {
		ok, err := o.Confirm(fmt.Sprintf("Run drill %s on cluster %s as planned above?", o.Kind, e.c.Metadata.Name))
		if err != nil {
			return e.report, err
		}
		if !ok {
			return e.report, &InputError{Err: errors.New("not confirmed: nothing was done")}
		}
	}
	return e.iterations(ctx, k, pre)
}

// iterations runs k's Options.Count iterations (waiting for a healthy cluster before each further
// one), adding each to the report, and decides the verdict.
func (e *env) iterations(ctx context.Context, k drillKind, pre *preflightState) (*Report, error) {
	o := e.o
	var err error
	for i := 1; i <= o.Count; i++ {
		if i > 1 {
			if pre, err = e.waitHealthy(ctx, i, k.vipHolder()); err != nil {
				e.finish()
				e.report.setError(err)
				return e.report, err
			}
		}
		it, err := k.iterate(ctx, i, pre)
		if it != nil {
			e.report.Iterations = append(e.report.Iterations, *it)
			e.p.Infof("drill/iteration %d/%d: %s", i, o.Count, it.line())
		}
		if err != nil {
			e.finish()
			e.report.setError(err)
			return e.report, err
		}
		if ctx.Err() != nil {
			e.finish()
			err := fmt.Errorf("drill interrupted after iteration %d (everything was put back): %w", i, ctx.Err())
			e.report.setError(err)
			return e.report, err
		}
	}
	e.finish()
	if e.report.Verdict == "fail" {
		return e.report, &VerdictError{Failures: e.report.Failures}
	}
	return e.report, nil
}

func (e *env) finish() {
	e.report.summarize()
	e.report.decide()
}

// line is an iteration's one-line progress summary.
func (it *Iteration) line() string {
	var parts []string
	if it.LeaderBefore != "" {
		parts = append(parts, fmt.Sprintf("leader %s → %s", it.LeaderBefore, dash(it.LeaderAfter)))
	}
	if it.ElectionMs != nil {
		parts = append(parts, "election "+fmtMs(it.ElectionMs))
	}
	if it.StepDownMs != nil {
		parts = append(parts, "old leader stepped down after "+fmtMs(it.StepDownMs))
	}
	switch {
	case it.VIPMovedMs != nil:
		parts = append(parts, fmt.Sprintf("VIP %s → %s in %s", it.VIPBefore, dash(it.VIPAfter), fmtMs(it.VIPMovedMs)))
	case it.VIPBefore != "":
		parts = append(parts, fmt.Sprintf("VIP stayed on %s", it.VIPBefore))
	}
	parts = append(parts, "RTO "+fmtMs(it.RTOMs))
	if x := it.Restore; x != nil && x.Verification != nil {
		parts = append(parts, fmt.Sprintf("RPO %s (%s), %d acked before t0 lost", fmtMs(&x.RPOMs), x.RPOFrom, x.LostWrites))
	}
	if it.LongestGapMs != nil {
		parts = append(parts, "longest gap "+fmtMs(it.LongestGapMs))
	}
	if it.CatchUpMs != nil {
		parts = append(parts, "caught up in "+fmtMs(it.CatchUpMs))
	}
	if it.Verification != nil {
		parts = append(parts, fmt.Sprintf("%d acked, %d lost", it.Verification.Acked, it.Verification.Lost))
	}
	if len(it.Failures) > 0 {
		parts = append(parts, "FAILED: "+strings.Join(it.Failures, "; "))
	}
	return strings.Join(parts, ", ")
}

// settings are the timing settings of the cluster and the drill (the workload's are the kind's:
// workloadHeader).
func (e *env) settings() Settings {
	s := Settings{
		HeartbeatIntervalMs: ms(e.c.Spec.Etcd.HeartbeatInterval.Duration),
		ElectionTimeoutMs:   ms(e.c.Spec.Etcd.ElectionTimeout.Duration),
		HoldMs:              ms(e.o.Hold),
		PollIntervalMs:      ms(PollInterval),
		ResolutionMs:        ms(PollInterval),
		Count:               e.o.Count,
	}
	if lbs := e.c.ManagedLB(); lbs != nil {
		s.AdvertIntervalMs = ms(lbs.AdvertInterval.Duration)
		s.CheckIntervalMs = ms(lbs.HealthCheck.Interval.Duration)
		s.CheckFall, s.CheckRise = lbs.HealthCheck.Fall, lbs.HealthCheck.Rise
		s.ScriptIntervalMs, s.ScriptFall = float64(lb.ScriptInterval*1000), lbs.CheckFall
	}
	return s
}

// workloadHeader is the header of a drill that runs the etcd workload: its method, rate, request
// timeout, and the resolution the rate gives.
func (e *env) workloadHeader(rep *Report) {
	rep.Method = e.o.Method
	s := &rep.Settings
	s.Rate, s.RequestTimeoutMs = e.o.Rate, ms(e.o.RequestTimeout)
	if tick := time.Second / time.Duration(e.o.Rate); tick > PollInterval {
		s.ResolutionMs = ms(tick)
	}
}

// workloadPlan are the plan's lines of the etcd workload and what is measured with it.
func (e *env) workloadPlan() []string {
	return []string{
		fmt.Sprintf("workload: %d puts/s (each with a %s deadline) and linearizable reads through the TLS client, under %s; every acknowledged key is read back afterwards, then deleted",
			e.o.Rate, e.o.RequestTimeout, workloadPrefix(e.report.ID, 0)),
		fmt.Sprintf("measure every %s: new leader (election timeout %s: a follower campaigns after 1x-2x of it), first acknowledged write (RTO), longest gap, write p50/p99, catch-up of the returned member",
			PollInterval, e.c.Spec.Etcd.ElectionTimeout.Duration),
	}
}

func hostData(h v1alpha1.Host) fault.HostData {
	return fault.HostData{Host: h.Name, Address: h.Address, Zone: h.Zone}
}

func sshPort(c *v1alpha1.Cluster, h v1alpha1.Host) int {
	if h.Port != 0 {
		return h.Port
	}
	if c.Spec.SSH.Port != 0 {
		return c.Spec.SSH.Port
	}
	return provision.DefaultPort
}

// workloadRoot is where every drill's workload writes (each under its own drill ID and iteration).
const workloadRoot = "/hactl-drill/"

func workloadPrefix(id string, i int) string {
	if i == 0 {
		return "/hactl-drill/" + id + "/"
	}
	return fmt.Sprintf("/hactl-drill/%s/%d/", id, i)
}

func mustMembers(c *v1alpha1.Cluster) []etcd.Member {
	m, _ := etcd.MembersFromSpec(c) // checked in Run
	return m
}

// wallOf strips the monotonic reading for JSON.
func wallOf(t time.Time) time.Time { return t.Round(0).UTC() }
