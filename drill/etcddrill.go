package drill

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/provision"
)

// catchUpTimeout bounds waiting for a returned member to catch up.
const catchUpTimeout = 3 * time.Minute

// recoveryTimeout bounds the wait for the first acknowledged write after an --expect-outage
// drill's put-back.
const recoveryTimeout = 2 * time.Minute

// etcdKind is what kill-leader and az-outage do differently inside the iteration they share
// (etcdDrill.iterate).
type etcdKind interface {
	// targets are the hosts this iteration takes down.
	targets(pre *preflightState) ([]v1alpha1.Host, error)
	// faultText is the report's fault of an iteration on targets.
	faultText(targets []v1alpha1.Host) string
	// watch starts the kind's own watchers into m before the workload starts; an error ends the
	// iteration before the fault.
	watch(ctx context.Context, m *etcdRun) error
	// lostQuorum: no write can be acknowledged until the put-back (predicted): the recovery is
	// waited for and measured from the put-back.
	lostQuorum() bool
	// judge adds the kind's own figures and failures to m.it once everything is back; it calls
	// m.requireRecovery where the missing recovery's failure belongs among its own.
	judge(m *etcdRun)
}

// etcdDrill is what kill-leader and az-outage share: the etcd workload, the members' watch, the
// fault on the targets (by --method), the catch-up and the read-back.
type etcdDrill struct {
	*env
	faults *faulter
	kind   etcdKind
}

// newEtcdDrill is kind's etcdDrill on e (nil: for Options.Validate only), with the faults of
// --method: host (local commands), network (networkText and networkFault, the kind's own iptables
// fault), process (SIGKILL of units(h), held stopped).
func newEtcdDrill(e *env, kind etcdKind, units func(h v1alpha1.Host) []string,
	networkText func(h v1alpha1.Host) string, networkFault func(h v1alpha1.Host) fault.Fault) etcdDrill {
	d := etcdDrill{env: e, kind: kind}
	switch {
	case e == nil:
	case e.o.Method == MethodHost:
		d.faults = localFaulter(e)
	case e.o.Method == MethodNetwork:
		d.faults = &faulter{env: e, text: networkText, of: networkFault}
	default:
		d.faults = killFaulter(e, units)
	}
	return d
}

func (*etcdDrill) checkFlags(o *Options) error                       { return noRestoreFlags(o) }
func (*etcdDrill) minHold(o *Options) (time.Duration, string, error) { return electionHold(o) }
func (d *etcdDrill) header(rep *Report)                              { d.workloadHeader(rep) }
func (*etcdDrill) preflight(context.Context, *preflightState) error  { return nil }

// planTail are the plan's lines after the kind's own: the workload, the hold, the safety net and
// the verdict.
func (d *etcdDrill) planTail() []string {
	out := append(d.workloadPlan(), d.faults.holdPlan()...)
	if d.o.MaxRTO > 0 {
		return append(out, fmt.Sprintf("verdict: fail (exit 3) if any RTO exceeds %s or any acknowledged write is lost", d.o.MaxRTO))
	}
	return append(out, "verdict: fail (exit 3) if any acknowledged write is lost; add --max-rto for a verdict on the RTO")
}

// etcdRun is one iteration of an etcd drill in progress.
type etcdRun struct {
	*etcdDrill
	n   int
	pre *preflightState
	it  *Iteration
	// targets are the hosts taken down; exclude and members the etcd members among them.
	targets []v1alpha1.Host
	exclude map[string]bool
	members []string
	cli     *clientv3.Client
	wl      *workload.Run
	// mw watches every member; own (kill-leader --method network) the partitioned leader on its
	// loopback; lbw (az-outage) the VIP.
	mw  *memberWatch
	own *memberWatch
	lbw *lbWatch
	// t0 is when the first target went down, allDown when the last did; tPut when the put-back
	// started, putDone when it ended.
	t0, allDown, tPut, putDone time.Time
	// What the workload and the watchers saw.
	rec    *workload.Record
	obs    []Observation
	ownObs []Observation
	lbo    *lbObserved
	// leaderChanged and quorumHeld are what the observations show.
	leaderChanged, quorumHeld bool
}

// iterate is one kill-leader or az-outage iteration.
func (d *etcdDrill) iterate(ctx context.Context, n int, pre *preflightState) (*Iteration, error) {
	targets, err := d.kind.targets(pre)
	if err != nil {
		return nil, err
	}
	m := &etcdRun{etcdDrill: d, n: n, pre: pre, targets: targets, exclude: map[string]bool{},
		it: &Iteration{N: n, LeaderBefore: pre.leader, TermBefore: pre.term, VIPBefore: pre.vipHolder}}
	for _, h := range targets {
		m.it.Targets = append(m.it.Targets, h.Name)
		if h.HasRole(v1alpha1.RoleEtcd) {
			m.exclude[h.Name] = true
			m.members = append(m.members, h.Name)
		}
	}
	m.it.Fault = d.kind.faultText(targets)
	m.cli, err = etcd.NewClient(ctx, etcd.ClientURLs(mustMembers(d.c)), d.files, time.Second, d.o.EtcdDial)
	if err != nil {
		return nil, err
	}
	defer m.cli.Close()
	if err := m.start(ctx); err != nil {
		return nil, err
	}
	putErr, err := m.fault(ctx)
	if err != nil {
		return nil, err
	}
	m.figures()
	d.kind.judge(m)
	m.verify()
	if putErr != nil {
		return m.it, putErr
	}
	return m.it, nil
}

// start starts the watchers and the workload. The measurement runs until the put-back is done,
// also after Ctrl-C (which only cuts the hold).
func (m *etcdRun) start(ctx context.Context) error {
	mctx := context.WithoutCancel(ctx)
	var err error
	if m.mw, err = watchMembers(mctx, m.urls, m.files, 200*time.Millisecond, m.o.EtcdDial); err != nil {
		return err
	}
	if err := m.kind.watch(mctx, m); err != nil {
		m.stopWatchers()
		return err
	}
	m.wl, err = workload.Start(mctx, workload.Config{Client: m.cli, Prefix: workloadPrefix(m.report.ID, m.n), Rate: m.o.Rate, RequestTimeout: m.o.RequestTimeout})
	if err != nil {
		m.stopWatchers()
		return err
	}
	return nil
}

// stopWatchers ends the watchers and keeps what they saw.
func (m *etcdRun) stopWatchers() {
	if m.own != nil {
		m.ownObs = m.own.stop()
	}
	m.obs, m.lbo = m.mw.stop(), m.lbw.stop()
}

// stop ends the workload and the watchers.
func (m *etcdRun) stop() {
	m.rec = m.wl.Stop()
	m.stopWatchers()
}

// fault applies the fault after the warm-up, holds it, puts it back and waits for the catch-up
// (and, when quorum was lost, for the recovery); then it stops the workload and the watchers. err
// is the apply's error (the workload's keys are deleted then); putErr the put-back's.
func (m *etcdRun) fault(ctx context.Context) (putErr, err error) {
	sleepCtx(ctx, warmup)
	m.p.Infof("drill/fault: iteration %d: taking down %s", m.n, strings.Join(m.it.Targets, ", "))
	app, err := m.faults.apply(ctx, m.targets)
	if err != nil {
		m.stop()
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, cerr := workload.Cleanup(cctx, m.cli, workloadPrefix(m.report.ID, m.n)); cerr != nil {
			m.p.Warnf("drill: deleting the workload's keys under %s: %v (`hactl drill cleanup` deletes them)", workloadPrefix(m.report.ID, m.n), cerr)
		}
		return nil, err
	}
	// t0 is when the first target went down, allDown when the last did (they differ when a zone's
	// hosts are taken down in parallel): quorum is lost only from allDown on.
	m.t0, m.allDown = app[0].at, app[0].at
	for _, a := range app {
		if a.at.Before(m.t0) {
			m.t0 = a.at
		}
		if a.at.After(m.allDown) {
			m.allDown = a.at
		}
		m.it.FaultUncertaintyMs = max(m.it.FaultUncertaintyMs, ms(a.uncertainty))
	}
	for _, a := range app {
		m.p.Debugf("drill: %s down %s after t0 (± %s)", a.host, a.at.Sub(m.t0), a.uncertainty)
	}
	m.it.FaultAt = wallOf(m.t0)
	m.p.Infof("drill/hold: %s", m.o.Hold)
	sleepCtx(ctx, time.Until(m.t0.Add(m.o.Hold)))
	// The commit index the returned members must reach: the highest a survivor reports now.
	var commit uint64
	for name, o := range latest(m.mw.snapshot()) {
		if !m.exclude[name] {
			commit = max(commit, o.RaftIndex)
		}
	}
	m.tPut = time.Now()
	putErr = m.faults.putBack(m.targets)
	m.putDone = time.Now()
	m.it.PutBackMs = ms(m.putDone.Sub(m.t0))
	if putErr == nil && len(m.members) > 0 {
		m.p.Infof("drill/catch-up: waiting for %s to apply index %d", strings.Join(m.members, ", "), commit)
		d, err := m.catchUp(m.members, commit, m.tPut)
		if err != nil {
			m.it.Failures = append(m.it.Failures, err.Error())
		} else {
			m.it.CatchUpMs = msp(d)
		}
	}
	if putErr == nil && ctx.Err() == nil && m.kind.lostQuorum() {
		// Quorum returns with the zone: keep measuring until a write sent after the put-back is
		// acknowledged (an election first, which the catch-up does not wait for). Everything is
		// back already: Ctrl-C just ends the wait.
		m.p.Infof("drill/recovery: waiting (at most %s) for the first acknowledged write sent after the put-back", recoveryTimeout)
		err := wait.PollUntilContextTimeout(ctx, PollInterval, recoveryTimeout, false, func(context.Context) (bool, error) {
			return !m.wl.Progress().LastAckSent.Before(m.putDone), nil
		})
		if err != nil && ctx.Err() == nil {
			m.it.Notes = append(m.it.Notes, fmt.Sprintf("no write sent after the put-back was acknowledged within %s", recoveryTimeout))
		}
	}
	sleepCtx(context.Background(), settle)
	m.stop()
	return putErr, nil
}

// figures computes the workload's and the leader's figures shared by both kinds.
func (m *etcdRun) figures() {
	it, rec, t0 := m.it, m.rec, m.t0
	st := rec.Stats(t0)
	it.Workload = &st
	it.LongestGapMs, it.WriteP50Ms, it.WriteP99Ms = msp(st.LongestGap), msp(st.LatencyP50), msp(st.LatencyP99)
	sentDuring := 0
	for _, w := range rec.Writes {
		if !w.Sent.Before(t0) && w.Sent.Before(m.tPut) {
			sentDuring++
			if w.Acked {
				it.AckedDuringHold++
			}
		}
		if w.Acked && !w.Sent.Before(m.allDown) && w.Done.Before(m.tPut) {
			it.WritesAckedDuringFault++
			m.p.Debugf("drill: write %d acknowledged during the fault: sent %s, done %s after t0 (all targets down %s after t0), revision %d",
				w.Seq, w.Sent.Sub(t0), w.Done.Sub(t0), m.allDown.Sub(t0), w.Revision)
		}
	}
	it.SentDuringHold = sentDuring
	m.quorumHeld = it.WritesAckedDuringFault > 0
	if m.kind.lostQuorum() {
		// No write can be acknowledged until the zone returns: recovery counts from the put-back.
		ps := rec.Stats(m.putDone)
		if ps.RTOObserved {
			it.RTOMs = msp(ps.RTO)
		}
		it.RecoveryFromPutBack = true
	} else if st.RTOObserved {
		it.RTOMs = msp(st.RTO)
	}
	pre := m.pre
	if o, ok := newLeaderAt(m.obs, t0, pre.leaderID, m.exclude); ok && o.At.Before(m.tPut) {
		it.ElectionMs = msp(o.At.Sub(t0))
		it.LeaderAfter = memberName(o.Leader, m.obs, pre)
	} else if ok {
		it.LeaderAfter = memberName(o.Leader, m.obs, pre) // elected only after the put-back
	}
	for _, o := range m.obs { // the term the cluster ended the drill with
		if o.OK {
			it.TermAfter = max(it.TermAfter, o.Term)
		}
	}
	m.leaderChanged = leaderChanged(m.obs, t0, pre.leaderID)
	if !m.leaderChanged {
		it.LeaderAfter = pre.leader
	}
}

// requireRecovery fails the iteration when no write was acknowledged after the fault.
func (m *etcdRun) requireRecovery() {
	if m.it.RTOMs == nil {
		m.it.Failures = append(m.it.Failures, "no acknowledged write after the fault: the cluster did not recover while measured")
	}
}

// verify reads every acknowledged key back (quorum is back: the put-back is done), then deletes
// the workload's keys.
func (m *etcdRun) verify() {
	it := m.it
	vctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ver, verr := workload.Verify(vctx, m.cli, m.rec)
	if verr != nil {
		it.Failures = append(it.Failures, fmt.Sprintf("reading the acknowledged writes back: %v", verr))
	} else {
		it.Verification = ver
		if !ver.OK() {
			it.Failures = append(it.Failures, ver.Summary)
		}
	}
	if verr == nil {
		if _, err := workload.Cleanup(vctx, m.cli, workloadPrefix(m.report.ID, m.n)); err != nil {
			m.p.Warnf("drill: deleting the workload's keys under %s: %v", workloadPrefix(m.report.ID, m.n), err)
		}
	}
}

// memberName names member ID id from the observations (or the preflight status).
func memberName(id uint64, obs []Observation, pre *preflightState) string {
	for _, o := range obs {
		if o.OK && o.MemberID == id {
			return o.Member
		}
	}
	for _, ep := range pre.status.Endpoints {
		if v, err := strconv.ParseUint(ep.MemberID, 16, 64); err == nil && v == id {
			return ep.MemberName
		}
	}
	return fmt.Sprintf("%x", id)
}

// catchUp waits until every named member's applied index reaches commit and returns how long the
// slowest took from start (the put-back's start: the member's own start-up is part of it).
//
// It is etcd/membership's catch-up rule (WaitApplied) tuned for a measurement: commit is the
// leader's committed index read before the put-back (the highest a survivor reported then: after a
// zone outage the returning members have no leader to ask, and the figure is the time to apply what
// was committed when the fault ended, not a target that moves with the workload's writes), polled
// every PollInterval (20 ms, the figure's resolution), each member's status asked through
// memberStatus's own connection.
func (d *etcdDrill) catchUp(names []string, commit uint64, start time.Time) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var slowest time.Duration
	var mu sync.Mutex
	err := provision.ForEach(ctx, names, 0, func(n string) string { return n }, func(ctx context.Context, n string) error {
		took, err := d.catchUpOne(ctx, n, commit, start)
		mu.Lock()
		defer mu.Unlock()
		slowest = max(slowest, took)
		return err
	})
	return slowest, err
}

func (d *etcdDrill) catchUpOne(ctx context.Context, name string, commit uint64, start time.Time) (time.Duration, error) {
	st := &memberStatus{d: d, name: name}
	defer st.close()
	cu, err := membership.WaitApplied(ctx, st, d.urls[name], commit, catchUpTimeout, PollInterval)
	if err != nil {
		return 0, fmt.Errorf("%s did not catch up within %s (applied index %d, want %d; last error: %v)", name, catchUpTimeout, cu.Applied, commit, st.last)
	}
	return time.Since(start), nil
}

// memberStatus is catchUp's membership.Statuser: the status of one member, through a connection of
// its own (500 ms to dial, 300 ms per status) kept while the member answers and replaced after a
// failure (a reused gRPC connection would back off for seconds while the member starts). last is
// the last error it answered.
type memberStatus struct {
	d    *etcdDrill
	name string
	cli  *clientv3.Client
	last error
}

// Status asks the member's status (endpoint is its URL, which the connection already names).
func (s *memberStatus) Status(ctx context.Context, _ string) (*clientv3.StatusResponse, error) {
	if s.cli == nil {
		cli, err := etcd.NewClient(ctx, []string{s.d.urls[s.name]}, s.d.files, 500*time.Millisecond, s.d.o.EtcdDial)
		if err != nil {
			s.last = err
			return nil, err
		}
		s.cli = cli
	}
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	resp, err := pb.NewMaintenanceClient(s.cli.ActiveConnection()).Status(rctx, &pb.StatusRequest{})
	if err != nil {
		s.last = err
		s.close()
		return nil, err
	}
	return (*clientv3.StatusResponse)(resp), nil
}

func (s *memberStatus) close() {
	if s.cli != nil {
		s.cli.Close()
		s.cli = nil
	}
}

// watchOwnView starts watching member h's own status on its loopback through its SSH connection.
func (e *env) watchOwnView(ctx context.Context, h v1alpha1.Host) (*memberWatch, error) {
	cli, err := e.hosts.client(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddr(h.Address)
	if err != nil {
		return nil, err
	}
	return watchThroughHost(ctx, h.Name, cli, addr.Unmap(), e.c.Spec.Etcd.ClientPort, e.files, 200*time.Millisecond)
}
