package drill

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// Options configure a drill. Validate checks them locally; Run does the drill.
type Options struct {
	Cluster *v1alpha1.Cluster
	Kind    Kind
	// Method takes the target down (kill-leader, az-outage); Component is what lb-failover stops
	// (default haproxy; with spec.loadBalancer.external always ComponentAPIServer).
	Method    Method
	Component Component
	// Backend is the control-plane host lb-failover cuts off an external load balancer (default:
	// the first control-plane host in spec order); only with spec.loadBalancer.external.
	Backend string
	// Zone is az-outage's zone; ExpectOutage allows a zone whose loss breaks quorum (the drill then
	// measures the recovery after the zone returns).
	Zone         string
	ExpectOutage bool
	// Down and Up are --method host's commands, run on this machine for each target host.
	Down, Up *fault.HostCommand
	// Hold is how long the fault is held (default DefaultHold); Count how many iterations (>= 1).
	Hold  time.Duration
	Count int
	// MaxRTO (> 0) turns the report into a pass/fail verdict on every iteration's RTO.
	MaxRTO time.Duration
	// Rate and RequestTimeout configure the etcd workload (defaults DefaultRate, DefaultRequestTimeout).
	Rate           int
	RequestTimeout time.Duration
	// CAFile is the kube-apiserver CA for readyz through the VIP (default
	// spec.loadBalancer.healthCheck.caFile); required by lb-failover, optional for az-outage.
	CAFile string
	// DeadmanGrace is added to Hold for the on-host deadman (default DefaultDeadmanGrace).
	DeadmanGrace time.Duration
	// Force runs the drill even though preflight found the cluster unhealthy (never with leftovers).
	Force bool
	// DryRun stops after the plan.
	DryRun bool
	// Confirm asks whether to go ahead with the plan (nil: go ahead).
	Confirm func(question string) (bool, error)
	Printer *ui.Printer
	// Dialer is the SSH dialer (known_hosts verified); EtcdDial routes etcd connections (a bastion
	// tunnel), nil for direct ones. With Dialer nil, Run opens one from the spec (provision.FromSpec,
	// asking Prompt for secrets) and, with a bastion, routes etcd through it.
	Dialer   *provision.Dialer
	EtcdDial etcd.Option
	Prompt   provision.Prompter
	// Report, when set, is the file Run writes the JSON report to (atomically, Report.WriteFile)
	// once the report exists, also when the drill fails.
	Report string

	// The restore drill's: MaxRPO (default DefaultRestoreMaxRPO; MaxRTO defaults to
	// DefaultRestoreMaxRTO), how long the workload runs before the disaster (default
	// DefaultRestoreWarmup), and the snapshots.
	MaxRPO   time.Duration
	Warmup   time.Duration
	Restorer Restorer
	// Onto (--onto) is the spec of the cluster to rebuild on other hosts while the drilled
	// cluster's members are fenced (nil: restore in place); OntoFile its path, for messages.
	// KeepFenced leaves the drilled cluster's members fenced after the drill (a real failover);
	// by default they are unfenced and started again once the drill has measured.
	Onto       *v1alpha1.Cluster
	OntoFile   string
	KeepFenced bool
}

// Validate checks the options against the spec without contacting any host and returns an
// *InputError (exit 2) naming the flag or field and the fix.
func (o *Options) Validate() error {
	c := o.Cluster
	if o.Report != "" {
		if err := CheckReportPath(o.Report); err != nil {
			return err
		}
	}
	if o.Count < 1 {
		return &InputError{Err: fmt.Errorf("--count %d: must be at least 1", o.Count)}
	}
	if o.Hold == 0 {
		o.Hold = DefaultHold
	}
	if o.Hold < 0 {
		return &InputError{Err: fmt.Errorf("--hold %s: must be a positive duration, e.g. 10s", o.Hold)}
	}
	if o.MaxRTO < 0 {
		return &InputError{Err: fmt.Errorf("--max-rto %s: must be a positive duration, e.g. 5s", o.MaxRTO)}
	}
	if o.Kind == Restore {
		if err := o.validateRestore(); err != nil {
			return err
		}
	} else if o.MaxRPO != 0 || o.Warmup != 0 || o.Onto != nil || o.KeepFenced {
		return &InputError{Err: fmt.Errorf("--max-rpo, --warmup, --onto and --keep-fenced are for drill restore")}
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Rate < 1 || o.Rate > 1000 {
		return &InputError{Err: fmt.Errorf("--rate %d: must be between 1 and 1000 puts per second", o.Rate)}
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.RequestTimeout < 0 {
		return &InputError{Err: fmt.Errorf("--request-timeout %s: must be positive, e.g. 100ms", o.RequestTimeout)}
	}
	if o.DeadmanGrace == 0 {
		o.DeadmanGrace = DefaultDeadmanGrace
	}
	if o.Method == MethodHost && (o.Down == nil || o.Up == nil) {
		return &InputError{Err: errors.New("--method host needs --down-command and --up-command (Go templates run on this machine, e.g. --down-command 'virsh destroy {{.Host}}' --up-command 'virsh start {{.Host}}'; fields .Host, .Address, .Zone)")}
	}
	if o.Method != MethodHost && (o.Down != nil || o.Up != nil) {
		return &InputError{Err: fmt.Errorf("--down-command and --up-command are for --method host (the method is %s)", o.Method)}
	}
	if len(c.EtcdHosts()) < 3 && o.Kind != LBFailover && o.Kind != Restore {
		return &InputError{Err: fmt.Errorf("spec.hosts: %d etcd member(s): losing one loses quorum; drills need 3 or 5 members", len(c.EtcdHosts()))}
	}
	switch o.Kind {
	case KillLeader, Restore:
	case AZOutage:
		if o.Zone == "" {
			return &InputError{Err: fmt.Errorf("--zone is required: one of %s", strings.Join(Zones(c), ", "))}
		}
		p, err := PredictZone(c, o.Zone)
		if err != nil {
			return err
		}
		if !p.QuorumHolds && !o.ExpectOutage {
			return &InputError{Err: fmt.Errorf("--zone %s: %s; refused: add --expect-outage to run it anyway (the drill then measures the recovery after the zone returns)",
				o.Zone, p.Sentences()[0])}
		}
		if p.QuorumHolds && o.ExpectOutage {
			return &InputError{Err: fmt.Errorf("--expect-outage: losing %s leaves %d of %d members, quorum holds: there is no outage to expect; drop the flag", o.Zone, p.Survivors, p.Total)}
		}
	case LBFailover:
		if c.Spec.LoadBalancer == nil {
			return &InputError{Err: errors.New("spec.loadBalancer is not set: lb-failover needs the VIP and its LB hosts, or spec.loadBalancer.external")}
		}
		if c.ExternalLB() != nil {
			if err := o.validateExternal(); err != nil {
				return err
			}
			break
		}
		switch {
		case o.Component == "":
			o.Component = ComponentHAProxy
		case o.Component == ComponentAPIServer:
			return &InputError{Err: errors.New("--component kube-apiserver is for spec.loadBalancer.external (a backend cut off your load balancer); hactl's load balancer fails over with --component haproxy or keepalived")}
		}
		if o.Backend != "" {
			return &InputError{Err: errors.New("--backend is for spec.loadBalancer.external; with hactl's load balancer lb-failover stops --component on the VIP holder")}
		}
		if n := len(c.LBHosts()); n < 2 {
			return &InputError{Err: fmt.Errorf("spec.hosts: %d LB host(s): lb-failover needs at least 2 (a VIP holder and a backup)", n)}
		}
		if o.caFile() == "" {
			return &InputError{Err: errors.New("lb-failover asks https://VIP/readyz and must verify the kube-apiserver's certificate: pass --ca-file (the cluster CA, /etc/kubernetes/pki/ca.crt on a control-plane host) or set spec.loadBalancer.healthCheck.caFile")}
		}
	default:
		return &InputError{Err: fmt.Errorf("unknown drill %q", o.Kind)}
	}
	if f := o.caFile(); f != "" {
		raw, err := os.ReadFile(f)
		if err != nil {
			return &InputError{Err: fmt.Errorf("--ca-file: %w", err)}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(raw) {
			return &InputError{Err: fmt.Errorf("--ca-file %s: no PEM certificate in it: give the cluster CA (/etc/kubernetes/pki/ca.crt on a control-plane host)", f)}
		}
	}
	// The hold must give the measured thing time to happen: an election takes up to 2x the
	// election timeout (a follower campaigns after a randomised 1x-2x, etcd raft); the VIP moves after
	// keepalived's check fails and the backup's master-down interval (RFC 5798).
	need := 2*c.Spec.Etcd.ElectionTimeout.Duration + time.Second
	what := fmt.Sprintf("2 x the election timeout (%s) + 1s", c.Spec.Etcd.ElectionTimeout.Duration)
	if o.Kind == LBFailover && c.ExternalLB() != nil {
		need, what = minExternalHold, "the minimum for a load balancer's health check"
	} else if o.Kind == LBFailover {
		p, err := lb.Plan(c)
		if err != nil {
			return &InputError{Err: err}
		}
		need = expectedVIPMove(p, o.Component) + time.Second
		what = "the expected VIP move + 1s"
	}
	if o.Hold < need && o.Kind != Restore {
		return &InputError{Err: fmt.Errorf("--hold %s: shorter than %s = %s: the fault would be put back before it can be measured", o.Hold, what, need.Round(10*time.Millisecond))}
	}
	return nil
}

// caFile is --ca-file, else spec.loadBalancer.healthCheck.caFile.
func (o *Options) caFile() string {
	if o.CAFile != "" {
		return o.CAFile
	}
	if lbs := o.Cluster.Spec.LoadBalancer; lbs != nil {
		return lbs.HealthCheck.CAFile
	}
	return ""
}

// runner is one drill in progress.
type runner struct {
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

// run is Run once the options are valid and the dialer is open.
func run(ctx context.Context, o *Options) (*Report, error) {
	start := time.Now()
	unlock, err := lock(o.Cluster.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r := &runner{o: o, p: o.Printer, c: o.Cluster, hosts: newHosts(o.Cluster, o.Dialer)}
	defer r.hosts.close()
	if o.Onto != nil {
		_, dial, closeOnto, err := dialers(o.Onto, nil, nil, o.Prompt)
		if err != nil {
			return nil, fmt.Errorf("--onto %s: %w", o.OntoFile, err)
		}
		defer closeOnto()
		r.ontoDial = dial
	}
	r.files = etcd.HactlClientTLS(r.c)
	members, err := etcd.MembersFromSpec(r.c)
	if err != nil {
		return nil, err
	}
	r.urls = map[string]string{}
	for _, m := range members {
		r.urls[m.Name] = m.ClientURL()
	}
	if r.c.ManagedLB() != nil {
		if r.lbPlan, err = lb.Plan(r.c); err != nil {
			return nil, err
		}
	}
	r.report = &Report{ID: newID(), Cluster: r.c.Metadata.Name, Drill: o.Kind, Started: start.UTC(), Settings: r.settings()}
	if o.Kind != LBFailover {
		r.report.Method = o.Method
	} else {
		r.report.Component = o.Component
	}
	r.report.Zone = o.Zone
	if o.MaxRTO > 0 {
		r.report.MaxRTOMs = ms(o.MaxRTO)
	}
	if o.MaxRPO > 0 {
		r.report.MaxRPOMs = ms(o.MaxRPO)
	}
	defer func() { r.report.DurationMs = ms(time.Since(start)) }()

	pre, err := r.preflight(ctx)
	if err != nil {
		return nil, err
	}
	if o.Kind == Restore {
		snap, err := r.restorePreflight(ctx)
		if err != nil {
			return nil, err
		}
		r.report.Plan = r.restorePlan(snap)
	} else {
		r.report.Plan = r.plan(pre)
	}
	r.p.Infof("drill/plan")
	for _, l := range r.report.Plan {
		r.p.Infof("  %s", l)
	}
	if o.DryRun {
		r.report.DryRun = true
		r.report.Verdict = "dry-run"
		return r.report, nil
	}
	if o.Confirm != nil {
		ok, err := o.Confirm(fmt.Sprintf("Run drill %s on cluster %s as planned above?", o.Kind, r.c.Metadata.Name))
		if err != nil {
			return r.report, err
		}
		if !ok {
			return r.report, &InputError{Err: errors.New("not confirmed: nothing was done")}
		}
	}
	for i := 1; i <= o.Count; i++ {
		if i > 1 {
			if pre, err = r.waitHealthy(ctx, i); err != nil {
				r.finish()
				r.report.setError(err)
				return r.report, err
			}
		}
		var it *Iteration
		switch o.Kind {
		case LBFailover:
			it, err = r.lbIteration(ctx, i, pre)
		case Restore:
			it, err = r.restoreIteration(ctx)
		default:
			it, err = r.etcdIteration(ctx, i, pre)
		}
		if it != nil {
			r.report.Iterations = append(r.report.Iterations, *it)
			r.p.Infof("drill/iteration %d/%d: %s", i, o.Count, it.line())
		}
		if err != nil {
			r.finish()
			r.report.setError(err)
			return r.report, err
		}
		if ctx.Err() != nil {
			r.finish()
			err := fmt.Errorf("drill interrupted after iteration %d (everything was put back): %w", i, ctx.Err())
			r.report.setError(err)
			return r.report, err
		}
	}
	r.finish()
	if r.report.Verdict == "fail" {
		return r.report, &VerdictError{Failures: r.report.Failures}
	}
	return r.report, nil
}

func (r *runner) finish() {
	r.report.summarize()
	r.report.decide()
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

// settings are the timing settings of the cluster and the drill.
func (r *runner) settings() Settings {
	e := r.c.Spec.Etcd
	s := Settings{
		HeartbeatIntervalMs: ms(e.HeartbeatInterval.Duration),
		ElectionTimeoutMs:   ms(e.ElectionTimeout.Duration),
		HoldMs:              ms(r.o.Hold),
		PollIntervalMs:      ms(PollInterval),
		ResolutionMs:        ms(PollInterval),
		Count:               r.o.Count,
	}
	if r.o.Kind != LBFailover {
		s.Rate, s.RequestTimeoutMs = r.o.Rate, ms(r.o.RequestTimeout)
		if tick := time.Second / time.Duration(r.o.Rate); tick > PollInterval {
			s.ResolutionMs = ms(tick)
		}
	}
	if lbs := r.c.ManagedLB(); lbs != nil {
		s.AdvertIntervalMs = ms(lbs.AdvertInterval.Duration)
		s.CheckIntervalMs = ms(lbs.HealthCheck.Interval.Duration)
		s.CheckFall, s.CheckRise = lbs.HealthCheck.Fall, lbs.HealthCheck.Rise
		s.ScriptIntervalMs, s.ScriptFall = float64(lb.ScriptInterval*1000), lbs.CheckFall
	}
	return s
}

// preflightState is what preflight found: the leader and the VIP holder.
type preflightState struct {
	leader   string // member name
	leaderID uint64
	term     uint64
	status   *etcd.ClusterStatus
	// vipHolder is the LB host holding the VIP ("" without a load balancer or not asked).
	vipHolder string
}

// preflight refuses when an earlier drill left something behind (journal or on-host leftovers:
// never overridable) or when the cluster is unhealthy (--force overrides), and finds the leader
// and the VIP holder.
func (r *runner) preflight(ctx context.Context) (*preflightState, error) {
	r.p.Infof("drill/preflight: looking for an earlier drill's leftovers and checking every member's health")
	j, err := readJournal(r.c.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	insp := r.hosts.inspect(ctx, drillHosts(r.c))
	if reasons := leftoverReasons(j, insp); len(reasons) > 0 {
		return nil, &RefusedError{Reasons: reasons, Fix: "an earlier drill left these behind: put everything back with `hactl drill cleanup --yes` (same -f), then run the drill again"}
	}
	pre, reasons, err := r.health(ctx)
	if err != nil {
		return nil, err
	}
	if len(reasons) > 0 {
		if !r.o.Force {
			return nil, &RefusedError{Reasons: reasons, Fix: "a drill on an unhealthy cluster measures the wrong thing and may lose quorum: fix it first (see `hactl status`) or add --force"}
		}
		r.p.Warnf("drill/preflight: --force: going ahead although %s", strings.Join(reasons, "; "))
	}
	if r.c.ManagedLB() != nil && (r.o.Kind == LBFailover || r.o.Kind == AZOutage) {
		holders, err := r.vipHolders(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case len(holders) == 1:
			pre.vipHolder = holders[0]
		case r.o.Kind == LBFailover && !r.o.Force:
			return nil, &RefusedError{Reasons: []string{fmt.Sprintf("the VIP is held by %d hosts (%s), want exactly 1", len(holders), strings.Join(holders, ", "))},
				Fix: "see `hactl status` (load balancer section) and fix keepalived first"}
		}
	}
	return pre, nil
}

// health asks every member for its status and returns the leader and what is unhealthy.
func (r *runner) health(ctx context.Context) (*preflightState, []string, error) {
	return health(ctx, r.c, r.files, r.o.EtcdDial)
}

// health asks every member of c for its status and returns the leader and what is unhealthy.
func health(ctx context.Context, c *v1alpha1.Cluster, files etcd.TLSFiles, dial etcd.Option) (*preflightState, []string, error) {
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return nil, nil, err
	}
	st, err := etcd.StatusWithTimeout(ctx, etcd.ClientURLs(members), files, 3*time.Second, 3*time.Second, dial)
	if st == nil {
		return nil, nil, fmt.Errorf("drill/preflight: reading the members' status: %w", err)
	}
	pre := &preflightState{status: st}
	var reasons []string
	if !st.QuorumReachable {
		reasons = append(reasons, "no quorum reachable")
	}
	names := map[string]string{}
	for _, m := range members {
		names[m.ClientURL()] = m.Name
	}
	for _, ep := range st.Endpoints {
		name := names[ep.Endpoint]
		switch {
		case !ep.Reachable:
			reasons = append(reasons, fmt.Sprintf("member %s (%s) unreachable: %s", name, ep.Endpoint, ep.Error))
		case !ep.Healthy:
			reasons = append(reasons, fmt.Sprintf("member %s (%s) unhealthy: %s", name, ep.Endpoint, ep.HealthError))
		case ep.IsLearner:
			reasons = append(reasons, fmt.Sprintf("member %s is a learner (not promoted)", name))
		}
		if ep.IsLeader {
			pre.leader, pre.term = name, ep.RaftTerm
			pre.leaderID, _ = strconv.ParseUint(ep.MemberID, 16, 64)
		}
	}
	for _, a := range st.Alarms {
		reasons = append(reasons, fmt.Sprintf("alarm %s raised on member %s (etcdctl alarm list)", a.Alarm, a.MemberID))
	}
	if pre.leader == "" && st.QuorumReachable {
		reasons = append(reasons, "no member reports being the leader")
	}
	return pre, reasons, nil
}

// waitHealthy waits (up to 2 minutes) for every member to be healthy again before iteration i.
func (r *runner) waitHealthy(ctx context.Context, i int) (*preflightState, error) {
	var pre *preflightState
	var reasons []string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pre, reasons, err = r.health(ctx)
		lastErr = err
		if err != nil || len(reasons) > 0 {
			return false, nil
		}
		if r.c.ManagedLB() == nil || (r.o.Kind != LBFailover && r.o.Kind != AZOutage) {
			return true, nil
		}
		holders, herr := r.vipHolders(ctx)
		switch {
		case herr != nil:
			lastErr = herr
			return false, nil
		case len(holders) != 1:
			reasons = append(reasons, fmt.Sprintf("VIP held by %d hosts", len(holders)))
			return false, nil
		}
		pre.vipHolder = holders[0]
		return true, nil
	})
	switch {
	case err == nil:
		return pre, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("before iteration %d: %w", i, ctx.Err())
	case lastErr != nil:
		return nil, fmt.Errorf("before iteration %d: the cluster did not become healthy within 2m: %w", i, lastErr)
	}
	return nil, &RefusedError{Reasons: reasons, Fix: fmt.Sprintf("the cluster did not become healthy within 2m before iteration %d", i)}
}

// plan returns the plan's lines.
func (r *runner) plan(pre *preflightState) []string {
	o := r.o
	var out []string
	switch o.Kind {
	case KillLeader:
		out = append(out, fmt.Sprintf("find the etcd leader before each iteration (now %s, term %d) and take it down by --method %s:", pre.leader, pre.term, o.Method))
		out = append(out, "  "+r.faultText(pre.leader))
		healthy := 0
		for _, ep := range pre.status.Endpoints {
			if ep.Healthy {
				healthy++
			}
		}
		if n := len(r.c.EtcdHosts()); healthy-1 < Quorum(n) {
			out = append(out, fmt.Sprintf("WARNING (--force): only %d of %d members are healthy: without the leader %d remain, below the quorum of %d: no leader can be elected and no write acknowledged until the put-back (the drill will fail)",
				healthy, n, healthy-1, Quorum(n)))
		}
	case AZOutage:
		pred, _ := PredictZone(r.c, o.Zone)
		pred.SetRuntime(pre.leader, pre.vipHolder)
		r.report.Prediction = pred
		out = append(out, fmt.Sprintf("take down every host of %s by --method %s:", o.Zone, o.Method))
		for _, h := range r.zoneHosts() {
			out = append(out, "  "+r.faultText(h.Name))
		}
		out = append(out, pred.Sentences()...)
	case LBFailover:
		if r.c.ExternalLB() != nil {
			out = append(out, r.externalPlan()...)
			break
		}
		out = append(out, fmt.Sprintf("stop %s on the VIP holder (now %s) and poll GET %s every %s on fresh connections",
			o.Component.Unit(), dash(pre.vipHolder), r.readyzURL(), PollInterval))
		if o.Component == ComponentKeepalived {
			out = append(out, fmt.Sprintf("  expect: the VIP on %s within about %s (keepalived sends a priority-0 advertisement as it stops: the backup takes over after its skew time, RFC 5798 §6.4.3)",
				strings.Join(r.otherLB(pre.vipHolder), " or "), expectedVIPMove(r.lbPlan, o.Component)))
		} else {
			out = append(out, fmt.Sprintf("  expect: the VIP on %s within about %s (keepalived's check of HAProxy fails after %ds x%d, then the backup waits out the RFC 5798 master-down interval %s)",
				strings.Join(r.otherLB(pre.vipHolder), " or "), expectedVIPMove(r.lbPlan, o.Component).Round(10*time.Millisecond), lb.ScriptInterval, r.lbPlan.ScriptFall, masterDown(r.lbPlan).Round(10*time.Millisecond)))
		}
		out = append(out, fmt.Sprintf("  after the hold, start %s again and wait for the VIP to settle on %s", o.Component.Unit(), r.expectedSettle(pre.vipHolder)))
	}
	if o.Kind != LBFailover {
		out = append(out, fmt.Sprintf("workload: %d puts/s (each with a %s deadline) and linearizable reads through the TLS client, under %s; every acknowledged key is read back afterwards, then deleted",
			o.Rate, o.RequestTimeout, workloadPrefix(r.report.ID, 0)))
		out = append(out, fmt.Sprintf("measure every %s: new leader (election timeout %s: a follower campaigns after 1x-2x of it), first acknowledged write (RTO), longest gap, write p50/p99, catch-up of the returned member",
			PollInterval, r.c.Spec.Etcd.ElectionTimeout.Duration))
	}
	out = append(out, fmt.Sprintf("hold the fault %s, then put everything back; %d iteration(s)", o.Hold, o.Count))
	if o.Method != MethodHost || o.Kind == LBFailover {
		out = append(out, fmt.Sprintf("safety: the fault is recorded in %s and on the host; each host puts itself back after %s even if hactl dies (hactl-drill-restore.timer)", journalPath(r.c.Spec.StateDir), o.Hold+o.DeadmanGrace))
	} else {
		out = append(out, fmt.Sprintf("safety: the fault and its --up-command are recorded in %s; `hactl drill cleanup` runs it if this drill is interrupted", journalPath(r.c.Spec.StateDir)))
	}
	switch ext := r.c.ExternalLB() != nil; {
	case o.Kind == LBFailover && ext && o.MaxRTO > 0:
		out = append(out, fmt.Sprintf("verdict: fail (exit 3) if requests through your load balancer fail for longer than %s, or still fail within %s of the put-back (the backend never taken out)", o.MaxRTO, minQuietBeforePut))
	case o.Kind == LBFailover && ext:
		out = append(out, fmt.Sprintf("verdict: fail (exit 3) if requests through your load balancer still fail within %s of the put-back (the backend never taken out); add --max-rto for a verdict on the RTO", minQuietBeforePut))
	case o.Kind == LBFailover && o.MaxRTO > 0:
		out = append(out, fmt.Sprintf("verdict: fail (exit 3) if readyz through the VIP takes longer than %s to answer again, the VIP does not move or does not settle", o.MaxRTO))
	case o.Kind == LBFailover:
		out = append(out, "verdict: fail (exit 3) if the VIP does not move, readyz does not answer again or the VIP does not settle; add --max-rto for a verdict on the RTO")
	case o.MaxRTO > 0:
		out = append(out, fmt.Sprintf("verdict: fail (exit 3) if any RTO exceeds %s or any acknowledged write is lost", o.MaxRTO))
	default:
		out = append(out, "verdict: fail (exit 3) if any acknowledged write is lost; add --max-rto for a verdict on the RTO")
	}
	return out
}

// faultText says what the method does to host name.
func (r *runner) faultText(name string) string {
	h, _ := r.hosts.host(name)
	if r.o.Kind == LBFailover && r.o.Component == ComponentAPIServer {
		return fmt.Sprintf("%s: iptables drops TCP to and from kube-apiserver's port %d, in and out", name, r.c.APIServerPort())
	}
	if r.o.Kind == LBFailover {
		return fmt.Sprintf("%s: %s stopped (systemctl stop)", name, r.o.Component.Unit())
	}
	switch r.o.Method {
	case MethodHost:
		d, _ := r.o.Down.Render(hostData(h))
		u, _ := r.o.Up.Render(hostData(h))
		return fmt.Sprintf("%s: run `%s` here, after the hold `%s`", name, d, u)
	case MethodNetwork:
		if r.o.Kind == KillLeader {
			return fmt.Sprintf("%s: iptables drops etcd's peer (%d) and client (%d) traffic in and out", name, r.c.Spec.Etcd.PeerPort, r.c.Spec.Etcd.ClientPort)
		}
		return fmt.Sprintf("%s: iptables drops all traffic in and out except SSH (port %d)", name, sshPort(r.c, h))
	default:
		return fmt.Sprintf("%s: SIGKILL of %s, units held stopped", name, strings.Join(r.processUnits(h), " and "))
	}
}

func hostData(h v1alpha1.Host) fault.HostData {
	return fault.HostData{Host: h.Name, Address: h.Address, Zone: h.Zone}
}

// processUnits are what --method process kills on h: etcd on a member (kill-leader: only etcd),
// haproxy and keepalived on an LB host too (az-outage).
func (r *runner) processUnits(h v1alpha1.Host) []string {
	if r.o.Kind == KillLeader {
		return []string{etcd.UnitName}
	}
	return unitsOf(h)
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

// zoneHosts are the etcd members and LB hosts of o.Zone.
func (r *runner) zoneHosts() []v1alpha1.Host {
	var out []v1alpha1.Host
	for _, h := range drillHosts(r.c) {
		if h.Zone == r.o.Zone {
			out = append(out, h)
		}
	}
	return out
}

// workloadRoot is where every drill's workload writes (each under its own drill ID and iteration).
const workloadRoot = "/hactl-drill/"

func workloadPrefix(id string, i int) string {
	if i == 0 {
		return "/hactl-drill/" + id + "/"
	}
	return fmt.Sprintf("/hactl-drill/%s/%d/", id, i)
}

// faultFor returns the on-host fault of host h.
func (r *runner) faultFor(h v1alpha1.Host) fault.Fault {
	f := fault.Fault{DrillID: r.report.ID, Deadman: r.o.Hold + r.o.DeadmanGrace}
	switch {
	case r.o.Kind == LBFailover && r.o.Component == ComponentAPIServer:
		f.DropPorts = []int{r.c.APIServerPort()}
	case r.o.Kind == LBFailover:
		f.StopUnits = []string{r.o.Component.Unit()}
	case r.o.Method == MethodNetwork && r.o.Kind == KillLeader:
		f.DropPorts = []int{r.c.Spec.Etcd.PeerPort, r.c.Spec.Etcd.ClientPort}
	case r.o.Method == MethodNetwork:
		f.Isolate, f.SSHPort = true, sshPort(r.c, h)
	default:
		f.KillUnits = r.processUnits(h)
	}
	return f
}
