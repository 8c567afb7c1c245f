package drill

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// catchUpTimeout bounds waiting for a returned member to catch up.
const catchUpTimeout = 3 * time.Minute

// recoveryTimeout bounds the wait for the first acknowledged write after an --expect-outage
// drill's put-back.
const recoveryTimeout = 2 * time.Minute

// applied is one fault applied to one host.
type applied struct {
	host string
	// at is the fault's instant (t0 for this host) and uncertainty how far off it may be.
	at          time.Time
	uncertainty time.Duration
	onHost      bool
}

// sleepCtx waits d or until ctx is done (it reports whether the whole d passed).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// applyFaults records the targets in the journal, then applies the fault to every target
// concurrently. If any fault fails, everything applied is put back and the error returned.
func (r *runner) applyFaults(ctx context.Context, targets []v1alpha1.Host) ([]applied, error) {
	j := &Journal{ID: r.report.ID, PID: os.Getpid(), Kind: r.o.Kind, Method: r.report.Method, Started: time.Now().UTC()}
	for _, h := range targets {
		jt := JournalTarget{Host: h.Name, Address: h.Address, Port: h.Port, Zone: h.Zone, Fault: r.faultText(h.Name), OnHost: r.onHost()}
		if jt.OnHost {
			jt.Deadline = time.Now().Add(r.o.Hold + r.o.DeadmanGrace).UTC()
		} else {
			jt.UpCommand, _ = r.o.Up.Render(hostData(h))
		}
		j.Targets = append(j.Targets, jt)
	}
	if err := writeJournal(r.c.Spec.StateDir, j); err != nil {
		return nil, err
	}
	out := make([]applied, len(targets))
	err := provision.ForEach(ctx, targets, r.c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		i := slices.IndexFunc(targets, func(t v1alpha1.Host) bool { return t.Name == h.Name })
		var err error
		out[i], err = r.applyOne(ctx, h)
		return err
	})
	if err == nil {
		return out, nil
	}
	// A host that refused because another drill's fault is on it is left alone; every other target
	// may carry (part of) this drill's fault and is put back.
	var ours []v1alpha1.Host
	for _, h := range targets {
		if !refusedAsNotClean(err, h.Name) {
			ours = append(ours, h)
		}
	}
	r.p.Warnf("drill/fault: failed; putting back what this drill did")
	if len(ours) == 0 {
		return nil, fmt.Errorf("drill/fault: %w (another drill's fault is on the host: it is left alone)", errors.Join(err, removeJournal(r.c.Spec.StateDir)))
	}
	if perr := r.putBack(ours); perr != nil {
		return nil, errors.Join(fmt.Errorf("drill/fault: %w", err), perr)
	}
	return nil, fmt.Errorf("drill/fault: %w", err)
}

// refusedAsNotClean reports whether err (from provision.ForEach) holds host's fault script refusing
// because the host still carries a drill (fault.ExitNotClean).
func refusedAsNotClean(err error, host string) bool {
	var me *multierror.Error
	if !errors.As(err, &me) {
		return false
	}
	for _, e := range me.Errors {
		var he *provision.HostError
		var ce *provision.CommandError
		if errors.As(e, &he) && he.Host == host && errors.As(e, &ce) && ce.ExitCode == fault.ExitNotClean {
			return true
		}
	}
	return false
}

func (r *runner) onHost() bool { return r.o.Kind == LBFailover || r.o.Method != MethodHost }

// applyOne applies the fault to h and returns its instant.
func (r *runner) applyOne(ctx context.Context, h v1alpha1.Host) (applied, error) {
	a := applied{host: h.Name, onHost: r.onHost()}
	if !a.onHost {
		cmd, err := r.o.Down.Render(hostData(h))
		if err != nil {
			return a, err
		}
		r.p.Hostf(h.Name, "[drill/fault] running here: %s", cmd)
		sent := time.Now()
		out, err := fault.RunLocal(ctx, cmd)
		done := time.Now()
		if err != nil {
			return a, fmt.Errorf("--down-command: %w", err)
		}
		r.p.Debugf("%s: --down-command output: %s", h.Name, strings.TrimSpace(out))
		r.hosts.forget(h.Name)
		// The host went down somewhere inside the command (a kill/destroy command returns once the
		// machine is down): t0 is its end, since writes sent before it may still have been served;
		// the command's duration is the uncertainty.
		a.at, a.uncertainty = done, done.Sub(sent)
		return a, nil
	}
	script, err := fault.ApplyScript(r.faultFor(h))
	if err != nil {
		return a, err
	}
	cli, err := r.hosts.client(ctx, h.Name)
	if err != nil {
		return a, err
	}
	sctx, cancel := context.WithTimeout(ctx, sshTimeout)
	defer cancel()
	sent := time.Now()
	res, err := cli.Run(sctx, "drill/fault", script)
	done := time.Now()
	if err != nil {
		return a, err
	}
	ar, err := fault.ParseApply(string(res.Stdout))
	if err != nil {
		return a, fmt.Errorf("the fault was not applied: %w", err)
	}
	a.at, a.uncertainty = faultInstant(sent, done, ar, r.o.Kind == LBFailover)
	r.p.Hostf(h.Name, "[drill/fault] %s", strings.TrimPrefix(r.faultText(h.Name), h.Name+": "))
	return a, nil
}

// faultInstant places the fault on this machine's monotonic clock. The fault script prints the
// host's time just before its first action and just after its last (fault.ApplyResult FaultStart
// and FaultEnd): the fault happened in that window, whose length is the uncertainty. It is mapped
// onto the local clock when it lies within [sent, done] (the host's clock agrees with this one, NTP);
// with a skewed clock, t0 is done (atStart: sent) and the uncertainty the whole round trip.
//
// Which end: a kill or an iptables rule takes effect at once and the window is short, but writes
// sent in the few ms before `systemctl kill` runs are still acknowledged and would fake a near-zero
// RTO: t0 is the END, every write sent after it met the fault (figures may understate by at most
// the uncertainty). A `systemctl stop` (lb-failover) takes effect when it starts (keepalived sends
// its priority-0 advertisement, HAProxy closes its listeners) but returns only once the service has
// exited, often after the VIP already moved: t0 is the START (atStart).
func faultInstant(sent, done time.Time, ar fault.ApplyResult, atStart bool) (time.Time, time.Duration) {
	ws, wd := sent.Round(0), done.Round(0)
	if ar.FaultStart.IsZero() || ar.FaultEnd.Before(ar.FaultStart) || ar.FaultStart.Before(ws) || ar.FaultEnd.After(wd) {
		if atStart {
			return sent, done.Sub(sent)
		}
		return done, done.Sub(sent)
	}
	at := ar.FaultEnd
	if atStart {
		at = ar.FaultStart
	}
	return sent.Add(at.Sub(ws)), ar.FaultEnd.Sub(ar.FaultStart)
}

// putBack puts every target back with a fresh context (also after Ctrl-C): the restore script over
// SSH, or --up-command here and SSH waited for. It removes the journal when all is back; otherwise
// it returns a *NotRestoredError.
func (r *runner) putBack(targets []v1alpha1.Host) error {
	var names []string
	for _, h := range targets {
		names = append(names, h.Name)
	}
	r.p.Infof("drill/put-back: %s", strings.Join(names, ", "))
	var err error
	if r.onHost() {
		err = r.hosts.putBack(names)
	} else {
		err = r.upAll(targets)
	}
	if err != nil {
		return err
	}
	return removeJournal(r.c.Spec.StateDir)
}

// upAll runs --up-command for every target here, then waits for SSH on each.
func (r *runner) upAll(targets []v1alpha1.Host) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var left []string
	err := provision.ForEach(ctx, targets, 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		cmd, err := r.o.Up.Render(hostData(h))
		if err == nil {
			r.p.Hostf(h.Name, "[drill/put-back] running here: %s", cmd)
			var out string
			out, err = fault.RunLocal(ctx, cmd)
			r.p.Debugf("%s: --up-command output: %s", h.Name, strings.TrimSpace(out))
		}
		if err == nil {
			err = r.hosts.waitSSH(ctx, h.Name, 3*time.Minute)
		}
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			left = append(left, fmt.Sprintf("%s: may still be down: bring it back with `%s`", h.Name, cmd))
		}
		return err
	})
	if err != nil {
		return &NotRestoredError{Left: left, Err: err}
	}
	return nil
}

// etcdIteration is one kill-leader or az-outage iteration.
func (r *runner) etcdIteration(ctx context.Context, n int, pre *preflightState) (*Iteration, error) {
	var targets []v1alpha1.Host
	if r.o.Kind == KillLeader {
		h, ok := r.hosts.host(pre.leader)
		if !ok {
			return nil, fmt.Errorf("the leader %s is not a host of the spec", pre.leader)
		}
		targets = []v1alpha1.Host{h}
	} else {
		targets = r.zoneHosts()
	}
	it := &Iteration{N: n, LeaderBefore: pre.leader, TermBefore: pre.term, VIPBefore: pre.vipHolder}
	exclude := map[string]bool{}
	var memberTargets []string
	for _, h := range targets {
		it.Targets = append(it.Targets, h.Name)
		if h.HasRole(v1alpha1.RoleEtcd) {
			exclude[h.Name] = true
			memberTargets = append(memberTargets, h.Name)
		}
	}
	it.Fault = r.faultText(targets[0].Name)
	if len(targets) > 1 {
		it.Fault = fmt.Sprintf("%d hosts of %s by --method %s", len(targets), r.o.Zone, r.o.Method)
	}
	cli, err := etcd.NewClient(ctx, etcd.ClientURLs(mustMembers(r.c)), r.files, time.Second, r.o.EtcdDial)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	// The measurement runs until the put-back is done, also after Ctrl-C (which only cuts the hold).
	mctx := context.WithoutCancel(ctx)
	mw, err := watchMembers(mctx, r.urls, r.files, 200*time.Millisecond, r.o.EtcdDial)
	if err != nil {
		return nil, err
	}
	// A partitioned leader must step down: watch it on its own loopback through SSH.
	var own *memberWatch
	if r.o.Kind == KillLeader && r.o.Method == MethodNetwork {
		own, err = r.watchOwnView(mctx, targets[0])
		if err != nil {
			r.p.Warnf("drill: cannot watch %s on its loopback through SSH (its step-down will not be observed): %v", targets[0].Name, err)
		}
	}
	var lbw *lbWatch
	if r.o.Kind == AZOutage && r.c.ManagedLB() != nil && r.report.Prediction != nil && len(r.report.Prediction.LBHosts) > 0 {
		if lbw, err = r.startLBWatch(mctx, false); err != nil {
			mw.stop()
			return nil, err
		}
	}
	wl, err := workload.Start(mctx, workload.Config{Client: cli, Prefix: workloadPrefix(r.report.ID, n), Rate: r.o.Rate, RequestTimeout: r.o.RequestTimeout})
	if err != nil {
		mw.stop()
		lbw.stop()
		return nil, err
	}
	var ownObs []Observation
	stopAll := func() (*workload.Record, []Observation, *lbObserved) {
		rec := wl.Stop()
		if own != nil {
			ownObs = own.stop()
		}
		return rec, mw.stop(), lbw.stop()
	}
	sleepCtx(ctx, warmup)
	r.p.Infof("drill/fault: iteration %d: taking down %s", n, strings.Join(it.Targets, ", "))
	app, err := r.applyFaults(ctx, targets)
	if err != nil {
		stopAll()
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, cerr := workload.Cleanup(cctx, cli, workloadPrefix(r.report.ID, n)); cerr != nil {
			r.p.Warnf("drill: deleting the workload's keys under %s: %v (`hactl drill cleanup` deletes them)", workloadPrefix(r.report.ID, n), cerr)
		}
		return nil, err
	}
	// t0 is when the first target went down, allDown when the last did (they differ when a zone's
	// hosts are taken down in parallel): quorum is lost only from allDown on.
	t0, allDown := app[0].at, app[0].at
	for _, a := range app {
		if a.at.Before(t0) {
			t0 = a.at
		}
		if a.at.After(allDown) {
			allDown = a.at
		}
		it.FaultUncertaintyMs = max(it.FaultUncertaintyMs, ms(a.uncertainty))
	}
	for _, a := range app {
		r.p.Debugf("drill: %s down %s after t0 (± %s)", a.host, a.at.Sub(t0), a.uncertainty)
	}
	it.FaultAt = wallOf(t0)
	r.p.Infof("drill/hold: %s", r.o.Hold)
	sleepCtx(ctx, time.Until(t0.Add(r.o.Hold)))
	// The commit index the returned members must reach: the highest a survivor reports now.
	var commit uint64
	for name, o := range latest(mw.snapshot()) {
		if !exclude[name] {
			commit = max(commit, o.RaftIndex)
		}
	}
	tPut := time.Now()
	putErr := r.putBack(targets)
	putDone := time.Now()
	it.PutBackMs = ms(putDone.Sub(t0))
	if putErr == nil && len(memberTargets) > 0 {
		r.p.Infof("drill/catch-up: waiting for %s to apply index %d", strings.Join(memberTargets, ", "), commit)
		d, err := r.catchUp(memberTargets, commit, tPut)
		if err != nil {
			it.Failures = append(it.Failures, err.Error())
		} else {
			it.CatchUpMs = msp(d)
		}
	}
	if putErr == nil && ctx.Err() == nil && r.report.Prediction != nil && !r.report.Prediction.QuorumHolds {
		// Quorum returns with the zone: keep measuring until a write sent after the put-back is
		// acknowledged (an election first, which the catch-up does not wait for). Everything is
		// back already: Ctrl-C just ends the wait.
		r.p.Infof("drill/recovery: waiting (at most %s) for the first acknowledged write sent after the put-back", recoveryTimeout)
		err := wait.PollUntilContextTimeout(ctx, PollInterval, recoveryTimeout, false, func(context.Context) (bool, error) {
			return !wl.Progress().LastAckSent.Before(putDone), nil
		})
		if err != nil && ctx.Err() == nil {
			it.Notes = append(it.Notes, fmt.Sprintf("no write sent after the put-back was acknowledged within %s", recoveryTimeout))
		}
	}
	sleepCtx(context.Background(), settle)
	rec, obs, lbo := stopAll()

	// Figures.
	st := rec.Stats(t0)
	it.Workload = &st
	it.LongestGapMs, it.WriteP50Ms, it.WriteP99Ms = msp(st.LongestGap), msp(st.LatencyP50), msp(st.LatencyP99)
	sentDuring := 0
	for _, w := range rec.Writes {
		if !w.Sent.Before(t0) && w.Sent.Before(tPut) {
			sentDuring++
			if w.Acked {
				it.AckedDuringHold++
			}
		}
		if w.Acked && !w.Sent.Before(allDown) && w.Done.Before(tPut) {
			it.WritesAckedDuringFault++
			r.p.Debugf("drill: write %d acknowledged during the fault: sent %s, done %s after t0 (all targets down %s after t0), revision %d",
				w.Seq, w.Sent.Sub(t0), w.Done.Sub(t0), allDown.Sub(t0), w.Revision)
		}
	}
	it.SentDuringHold = sentDuring
	quorumHeld := it.WritesAckedDuringFault > 0
	if r.report.Prediction != nil && !r.report.Prediction.QuorumHolds {
		// No write can be acknowledged until the zone returns: recovery counts from the put-back.
		ps := rec.Stats(putDone)
		if ps.RTOObserved {
			it.RTOMs = msp(ps.RTO)
		}
		it.RecoveryFromPutBack = true
	} else if st.RTOObserved {
		it.RTOMs = msp(st.RTO)
	}
	if o, ok := newLeaderAt(obs, t0, pre.leaderID, exclude); ok && o.At.Before(tPut) {
		it.ElectionMs = msp(o.At.Sub(t0))
		it.LeaderAfter = r.memberName(o.Leader, obs, pre)
	} else if ok {
		it.LeaderAfter = r.memberName(o.Leader, obs, pre) // elected only after the put-back
	}
	for _, o := range obs { // the term the cluster ended the drill with
		if o.OK {
			it.TermAfter = max(it.TermAfter, o.Term)
		}
	}
	leaderChanged := leaderChanged(obs, t0, pre.leaderID)
	if !leaderChanged {
		it.LeaderAfter = pre.leader
	}
	if own != nil {
		seen := 0 // answers of the partitioned member during the hold
		for _, o := range ownObs {
			if o.OK && o.At.After(t0) && o.At.Before(tPut) {
				seen++
			}
		}
		o, ok := steppedDownAt(ownObs, t0, pre.leaderID)
		switch {
		case ok && o.At.Before(tPut):
			it.StepDownMs = msp(o.At.Sub(t0))
		case seen == 0:
			it.Notes = append(it.Notes, fmt.Sprintf("the partitioned leader %s could not be asked on its loopback through SSH during the hold (sshd AllowTcpForwarding?): its step-down was not observed", pre.leader))
		default:
			it.Failures = append(it.Failures, fmt.Sprintf("the partitioned leader %s still reported itself leader throughout the hold (%d answers on its loopback)", pre.leader, seen))
		}
	}
	if r.o.Kind == KillLeader && it.ElectionMs == nil {
		it.Failures = append(it.Failures, fmt.Sprintf("no new leader was observed within the hold (%s)", r.o.Hold))
	}
	if it.RTOMs == nil {
		it.Failures = append(it.Failures, "no acknowledged write after the fault: the cluster did not recover while measured")
	}
	if lbo != nil {
		// Hosts taken off the network (or powered off) are not where clients reach the VIP; with
		// --method process they still are.
		cut := map[string]bool{}
		if r.o.Method != MethodProcess {
			for _, h := range targets {
				cut[h.Name] = true
			}
		}
		var notes []string
		it.VIPAfter, it.VIPMovedMs, it.ReadyzFailures, notes = lbo.after(t0, cut)
		it.Notes = append(it.Notes, notes...)
		if d, who := dualVIP(lbo.events, cut, t0); d > maxDualVIP {
			it.Failures = append(it.Failures, fmt.Sprintf("the VIP was on %s at once for %s, both reachable: both answer ARP for it (keepalived killed with SIGKILL leaves its address configured, as a crash would)",
				strings.Join(who, " and "), fmtMs(msp(d))))
		}
		if lbo.readyz {
			if o := lbo.outage(t0); o != nil {
				it.Failures = append(it.Failures, o.Error())
			}
		}
	}
	if p := r.report.Prediction; p != nil {
		it.Observed = &Observed{QuorumHeld: quorumHeld, LeaderChanged: leaderChanged, VIPMoved: it.VIPMovedMs != nil}
		if p.QuorumHolds != quorumHeld {
			it.Failures = append(it.Failures, fmt.Sprintf("predicted quorum holds=%v, observed %v (%d writes acknowledged during the outage)", p.QuorumHolds, quorumHeld, it.WritesAckedDuringFault))
		}
		if p.QuorumHolds && p.LeaderInZone != leaderChanged {
			it.Failures = append(it.Failures, fmt.Sprintf("predicted a new election=%v, observed leader changed=%v", p.LeaderInZone, leaderChanged))
		}
		if lbo != nil && p.VIPHolder != "" && p.VIPMustMove != (it.VIPMovedMs != nil) {
			it.Failures = append(it.Failures, fmt.Sprintf("predicted the VIP moves=%v, observed %v", p.VIPMustMove, it.VIPMovedMs != nil))
		}
	}
	// Read every acknowledged key back (quorum is back: the put-back is done).
	vctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ver, verr := workload.Verify(vctx, cli, rec)
	if verr != nil {
		it.Failures = append(it.Failures, fmt.Sprintf("reading the acknowledged writes back: %v", verr))
	} else {
		it.Verification = ver
		if !ver.OK() {
			it.Failures = append(it.Failures, ver.Summary)
		}
	}
	if verr == nil {
		if _, err := workload.Cleanup(vctx, cli, workloadPrefix(r.report.ID, n)); err != nil {
			r.p.Warnf("drill: deleting the workload's keys under %s: %v", workloadPrefix(r.report.ID, n), err)
		}
	}
	if putErr != nil {
		return it, putErr
	}
	return it, nil
}

// memberName names member ID id from the observations (or the preflight status).
func (r *runner) memberName(id uint64, obs []Observation, pre *preflightState) string {
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
// slowest took from start (the put-back's start: the member's own start-up is part of it). Each member gets a new connection per failed attempt (a reused gRPC connection
// would back off for seconds while the member starts).
func (r *runner) catchUp(names []string, commit uint64, start time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	var slowest time.Duration
	var mu sync.Mutex
	err := provision.ForEach(ctx, names, 0, func(n string) string { return n }, func(ctx context.Context, n string) error {
		d, err := r.catchUpOne(ctx, n, commit, start)
		mu.Lock()
		defer mu.Unlock()
		slowest = max(slowest, d)
		return err
	})
	return slowest, err
}

func (r *runner) catchUpOne(ctx context.Context, name string, commit uint64, start time.Time) (time.Duration, error) {
	var last error
	var applied uint64
	for {
		cli, err := etcd.NewClient(ctx, []string{r.urls[name]}, r.files, 500*time.Millisecond, r.o.EtcdDial)
		if err != nil {
			return 0, err
		}
		mc := pb.NewMaintenanceClient(cli.ActiveConnection())
		for {
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			resp, err := mc.Status(rctx, &pb.StatusRequest{})
			cancel()
			if err != nil {
				last = err
				break
			}
			applied = resp.RaftAppliedIndex
			if applied >= commit {
				cli.Close()
				return time.Since(start), nil
			}
			if !sleepCtx(ctx, PollInterval) {
				break
			}
		}
		cli.Close()
		if !sleepCtx(ctx, PollInterval) {
			return 0, fmt.Errorf("%s did not catch up within %s (applied index %d, want %d; last error: %v)", name, catchUpTimeout, applied, commit, last)
		}
	}
}

func mustMembers(c *v1alpha1.Cluster) []etcd.Member {
	m, _ := etcd.MembersFromSpec(c) // checked in Run
	return m
}

// wallOf strips the monotonic reading for JSON.
func wallOf(t time.Time) time.Time { return t.Round(0).UTC() }

// otherLB returns the LB hosts other than holder.
func (r *runner) otherLB(holder string) []string {
	var out []string
	for _, h := range r.c.LBHosts() {
		if h.Name != holder {
			out = append(out, h.Name)
		}
	}
	return out
}

// watchOwnView starts watching member h's own status on its loopback through its SSH connection.
func (r *runner) watchOwnView(ctx context.Context, h v1alpha1.Host) (*memberWatch, error) {
	cli, err := r.hosts.client(ctx, h.Name)
	if err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddr(h.Address)
	if err != nil {
		return nil, err
	}
	return watchThroughHost(ctx, h.Name, cli, addr.Unmap(), r.c.Spec.Etcd.ClientPort, r.files, 200*time.Millisecond)
}
