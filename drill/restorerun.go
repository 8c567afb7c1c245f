package drill

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// restoreRun is the restore drill's iteration in progress.
type restoreRun struct {
	*restoreDrill
	it      *Iteration
	members []v1alpha1.Host
	// cli is a client of the drilled cluster; rz asks readyz through the VIP (nil: not measured).
	cli *clientv3.Client
	rz  *probe.ReadyzRun
	wl  *workload.Run
	// prefix is the workload's; t0 the disaster's instant (the last kill's return).
	prefix string
	t0     time.Time
}

// iterate runs the restore drill: workload, disaster, restore, recovery, read-back.
func (d *restoreDrill) iterate(ctx context.Context, _ int, _ *preflightState) (*Iteration, error) {
	it := &Iteration{N: 1, Fault: "etcd killed on every member at once (SIGKILL, then the unit stopped)"}
	if d.o.Onto != nil {
		it.Fault = "every member fenced, then etcd killed on all of them at once; restored onto cluster " + d.o.Onto.Metadata.Name
	}
	m := &restoreRun{restoreDrill: d, it: it, members: d.c.EtcdHosts()}
	for _, h := range m.members {
		it.Targets = append(it.Targets, h.Name)
	}
	cli, err := etcd.NewClient(ctx, etcd.ClientURLs(mustMembers(d.c)), d.files, time.Second, d.o.EtcdDial)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	m.cli = cli
	mctx := context.WithoutCancel(ctx)
	if err := m.startReadyz(mctx); err != nil {
		return nil, err
	}
	if m.rz != nil {
		defer m.rz.Stop()
	}
	if err := m.fence(mctx); err != nil {
		return nil, err
	}
	m.prefix = workloadPrefix(d.report.ID, 1)
	// No reads: after a restore, a read of a write the restore gave up finds it missing by design;
	// the read-back (VerifyRestore) is the proof.
	m.wl, err = workload.Start(mctx, workload.Config{Client: cli, Prefix: m.prefix, Rate: d.o.Rate, ReadRate: -1, RequestTimeout: d.o.RequestTimeout})
	if err != nil {
		return nil, d.unfence(err)
	}
	if !sleepCtx(ctx, d.o.Warmup) {
		m.wl.Stop()
		return nil, d.unfence(fmt.Errorf("drill interrupted before the disaster (etcd was not stopped): %w", ctx.Err()))
	}
	if err := m.disaster(mctx); err != nil {
		return it, err
	}
	run, vcli, err := m.restore(mctx)
	if err != nil {
		return it, err
	}
	if vcli != cli {
		defer vcli.Close()
	}
	rec := m.recover(mctx)
	return it, m.readBack(vcli, rec, run)
}

// startReadyz starts asking readyz through the VIP when Kubernetes runs behind it (the recovery a
// user sees) and its CA is known; in place only.
func (m *restoreRun) startReadyz(ctx context.Context) error {
	if m.o.Onto != nil || m.c.Spec.Kubernetes == nil || m.lbPlan == nil || m.o.caFile() == "" {
		return nil
	}
	cfg, err := m.readyzTLS()
	if err != nil {
		return err
	}
	m.rz, err = probe.StartReadyz(ctx, probe.ReadyzConfig{URL: m.readyzURL(), TLS: cfg, Interval: PollInterval, Timeout: readyzTimeout})
	return err
}

// fence installs FenceDropIn on every member (--onto only); on error etcd is started again.
func (m *restoreRun) fence(ctx context.Context) error {
	if m.o.Onto == nil {
		return nil
	}
	m.p.Infof("drill/fence: %s on %s", FenceDropIn, strings.Join(m.it.Targets, ", "))
	if err := provision.ForEach(ctx, m.members, 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		_, err := m.hosts.run(ctx, h.Name, "drill/fence", fenceCommand(m.report.ID, m.o.Onto.Metadata.Name))
		return err
	}); err != nil {
		return m.restartEtcd(fmt.Errorf("drill/fence: %w", err))
	}
	return nil
}

// disaster kills every member in parallel, as a crash would (a graceful stop first tries to hand
// leadership over, which takes seconds while the peers stop too); the unit is then held stopped.
// t0 is when the last kill returned. On error the workload is stopped and etcd started again.
func (m *restoreRun) disaster(ctx context.Context) error {
	m.p.Infof("drill/disaster: killing etcd on %s", strings.Join(m.it.Targets, ", "))
	var mu sync.Mutex
	var first time.Time
	stopErr := provision.ForEach(ctx, m.members, 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		sent := time.Now()
		_, err := m.hosts.run(ctx, h.Name, "drill/disaster", "systemctl kill --signal=SIGKILL etcd.service 2>/dev/null || true; systemctl stop etcd.service")
		done := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() || sent.Before(first) {
			first = sent
		}
		if done.After(m.t0) {
			m.t0 = done
		}
		return err
	})
	m.it.FaultAt, m.it.FaultUncertaintyMs = wallOf(m.t0), ms(m.t0.Sub(first))
	if stopErr != nil {
		m.wl.Stop()
		return m.restartEtcd(fmt.Errorf("drill/disaster: %w", stopErr))
	}
	return nil
}

// restore runs the Restorer and returns what it did and a client of the restored cluster (the
// drilled one's, or with --onto a new client the workload is retargeted to: the caller closes it).
// On error the workload is stopped and restoreFailed's error returned.
func (m *restoreRun) restore(ctx context.Context) (*RestoreRun, *clientv3.Client, error) {
	it, t0 := m.it, m.t0
	m.p.Infof("drill/restore: restoring every member from the newest snapshot")
	run, rerr := m.o.Restorer.Restore(ctx)
	restored := time.Now()
	if rerr != nil {
		m.wl.Stop()
		return nil, nil, m.restoreFailed(ctx, it, fmt.Errorf("drill/restore: %w", rerr))
	}
	fig := &RestoreFigures{Snapshot: run.Snapshot, SnapshotAgeMs: ms(t0.Sub(run.Snapshot.Point())), Deltas: run.Deltas, FetchMs: ms(run.Fetch), RestoreMs: ms(run.Restore), RestoredRevision: run.Revision}
	it.Restore = fig
	it.PutBackMs = ms(restored.Sub(t0))
	o := m.o.Onto
	if o == nil {
		return run, m.cli, nil
	}
	fig.Onto = o.Metadata.Name
	ncli, err := etcd.NewClient(ctx, etcd.ClientURLs(mustMembers(o)), etcd.HactlClientTLS(o), time.Second, m.ontoDial)
	if err != nil {
		m.wl.Stop()
		return nil, nil, m.restoreFailed(ctx, it, fmt.Errorf("drill/recovery: a client of the new cluster %s: %w", o.Metadata.Name, err))
	}
	m.wl.Retarget(ncli)
	it.Notes = append(it.Notes, fmt.Sprintf("cluster %s was built from the snapshot on %s and keeps running: `hactl reset -f %s` removes it", o.Metadata.Name, strings.Join(hostNames(o.EtcdHosts()), ", "), m.o.OntoFile))
	return run, ncli, nil
}

// recover waits for the workload's first write acknowledged by the restored cluster (and readyz
// through the VIP), stops the workload and computes the RTOs.
func (m *restoreRun) recover(ctx context.Context) *workload.Record {
	it, fig, t0 := m.it, m.it.Restore, m.t0
	m.p.Infof("drill/recovery: waiting (at most %s) for the workload's first write acknowledged by the restored cluster", restoreRecoveryTimeout)
	if err := wait.PollUntilContextTimeout(ctx, PollInterval, restoreRecoveryTimeout, false, func(context.Context) (bool, error) {
		return m.wl.Progress().LastAck.After(t0), nil
	}); err != nil {
		it.Notes = append(it.Notes, fmt.Sprintf("no write was acknowledged within %s of the restore's end", restoreRecoveryTimeout))
	}
	if m.rz != nil {
		m.p.Infof("drill/recovery: waiting (at most %s) for readyz through the VIP", restoreRecoveryTimeout)
		if err := wait.PollUntilContextTimeout(ctx, PollInterval, restoreRecoveryTimeout, false, func(context.Context) (bool, error) {
			return probe.Outage(m.rz.Samples(), t0).Settled, nil
		}); err != nil {
			it.Notes = append(it.Notes, fmt.Sprintf("readyz through the VIP did not answer 200 within %s of the restore's end", restoreRecoveryTimeout))
		}
	}
	sleepCtx(context.Background(), settle)
	rec := m.wl.Stop()
	if m.rz != nil {
		out := probe.Outage(m.rz.Stop(), t0)
		fig.Readyz = &out
		if out.Settled {
			fig.ReadyzRTOMs = msp(out.SettledAfter)
		} else {
			it.Failures = append(it.Failures, "readyz through the VIP did not answer 200 again: Kubernetes did not recover while measured")
		}
	}
	st := rec.Stats(t0)
	it.Workload = &st
	it.LongestGapMs, it.WriteP50Ms, it.WriteP99Ms = msp(st.LongestGap), msp(st.LatencyP50), msp(st.LatencyP99)
	for _, w := range rec.Writes { // RTO: the first acknowledgement after t0
		if w.Acked && w.Done.After(t0) && (it.RTOMs == nil || ms(w.Done.Sub(t0)) < *it.RTOMs) {
			it.RTOMs = msp(w.Done.Sub(t0))
		}
	}
	if it.RTOMs == nil {
		it.Failures = append(it.Failures, "no write was acknowledged after the restore: the cluster did not recover while measured")
	}
	return rec
}

// readBack reads every acknowledged write back from the restored cluster (vcli), computes the RPO
// and the lost writes, deletes the workload's keys and ends a drill --onto (afterOnto).
func (m *restoreRun) readBack(vcli *clientv3.Client, rec *workload.Record, run *RestoreRun) error {
	it, fig, t0 := m.it, m.it.Restore, m.t0
	vctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ver, verr := workload.VerifyRestore(vctx, vcli, rec, t0)
	if verr != nil {
		it.Failures = append(it.Failures, fmt.Sprintf("reading the acknowledged writes back: %v", verr))
		return m.afterOnto(vctx, it, m.cli, m.prefix)
	}
	fig.Verification = ver
	fig.LostWrites = ver.LostBefore
	if ver.LostBefore > 0 {
		fig.LostFromMs, fig.LostToMs = msp(t0.Sub(ver.LostFrom)), msp(t0.Sub(ver.LostTo))
	}
	if !ver.NewestHeld.IsZero() {
		fig.RPOMs, fig.RPOFrom = ms(t0.Sub(ver.NewestHeld)), "workload"
	} else {
		fig.RPOMs, fig.RPOFrom = ms(t0.Sub(run.Snapshot.Point())), "snapshot"
		it.Notes = append(it.Notes, fmt.Sprintf("the restored point (%s before t0: the snapshot's start, or its newest delta's completion) predates the workload: the RPO is counted from it", fmtMs(&fig.SnapshotAgeMs)))
	}
	if !ver.OK() {
		it.Failures = append(it.Failures, ver.Summary)
	}
	if _, err := workload.Cleanup(vctx, vcli, m.prefix); err != nil {
		m.p.Warnf("drill: deleting the workload's keys under %s: %v (`hactl drill cleanup` deletes them)", m.prefix, err)
	}
	return m.afterOnto(vctx, it, m.cli, m.prefix)
}

// afterOnto ends a drill --onto other hosts: unless --keep-fenced, the drilled cluster's members are
// unfenced and etcd started again there, and the workload's keys written before t0 deleted from it
// (retried until ctx ends: the old cluster elects a leader first); with --keep-fenced they are listed
// as fenced. Errors: a member that could not be unfenced (*NotRestoredError).
func (d *restoreDrill) afterOnto(ctx context.Context, it *Iteration, cli *clientv3.Client, prefix string) error {
	if d.o.Onto == nil {
		return nil
	}
	names := hostNames(d.c.EtcdHosts())
	if d.o.KeepFenced {
		it.Restore.Fenced = names
		it.Notes = append(it.Notes, fmt.Sprintf("%s left fenced (--keep-fenced); to unfence a member: %s", strings.Join(names, ", "), unfenceText))
		return nil
	}
	if err := d.restartEtcd(nil); err != nil {
		return err
	}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := workload.Cleanup(cctx, cli, prefix)
		return err == nil, nil
	})
	if err != nil {
		d.p.Warnf("drill: deleting the workload's keys under %s from cluster %s: %v (`hactl drill cleanup` deletes them)", prefix, d.c.Metadata.Name, err)
	}
	it.Notes = append(it.Notes, fmt.Sprintf("%s unfenced and etcd started again there: cluster %s runs as before the drill", strings.Join(names, ", "), d.c.Metadata.Name))
	return nil
}

func hostNames(hs []v1alpha1.Host) []string {
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	return names
}

// restoreFailed ends a restore drill whose restore failed after the disaster. In place: etcd is
// started again (after hactl restore's rollback it already runs). Onto other hosts: the note says
// how to remove what was built there; with --keep-fenced, the old members stay fenced when a member
// of the new cluster answers (two clusters from one data set is what the fence prevents), and are
// unfenced otherwise (nothing else would serve); without it they are unfenced, as after a
// rehearsal that succeeded.
func (d *restoreDrill) restoreFailed(ctx context.Context, it *Iteration, cause error) error {
	o := d.o.Onto
	if o == nil {
		return d.restartEtcd(cause)
	}
	it.Notes = append(it.Notes, fmt.Sprintf("what was built of cluster %s on %s: `hactl reset -f %s` removes it", o.Metadata.Name, strings.Join(hostNames(o.EtcdHosts()), ", "), d.o.OntoFile))
	if d.o.KeepFenced {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := etcd.StatusWithTimeout(sctx, etcd.ClientURLs(mustMembers(o)), etcd.HactlClientTLS(o), 3*time.Second, 3*time.Second, d.ontoDial)
		cancel()
		if err == nil && st.ClusterID != "" {
			names := hostNames(d.c.EtcdHosts())
			it.Notes = append(it.Notes, fmt.Sprintf("cluster %s (%s) answers: %s left fenced (--keep-fenced); to unfence a member: %s", o.Metadata.Name, st.ClusterID, strings.Join(names, ", "), unfenceText))
			return fmt.Errorf("%w; %s left fenced (--keep-fenced) while cluster %s answers; to unfence a member: %s", cause, strings.Join(names, ", "), o.Metadata.Name, unfenceText)
		}
	}
	return d.restartEtcd(cause)
}

// unfence returns cause once the members are unfenced (--onto; etcd still runs there: start is a
// no-op), and cause as is in place (nothing was changed).
func (d *restoreDrill) unfence(cause error) error {
	if d.o.Onto == nil {
		return cause
	}
	return d.restartEtcd(cause)
}

// restartEtcd starts etcd on every member after the drill failed before the restore changed
// anything (or after hactl restore's rollback, where it is already running: start is a no-op), and
// returns cause, or a *NotRestoredError when some member could not be started. With --onto, the
// members are unfenced first (afterOnto calls it with a nil cause once the drill has measured).
func (d *restoreDrill) restartEtcd(cause error) error {
	cmd, what := "systemctl start etcd.service", "etcd started again on every member"
	if d.o.Onto != nil {
		cmd, what = unfenceCommand, "every member unfenced and etcd started again"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var left []string
	err := provision.ForEach(ctx, d.c.EtcdHosts(), 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		_, err := d.hosts.run(ctx, h.Name, "drill/put-back", cmd)
		if err != nil {
			mu.Lock()
			left = append(left, fmt.Sprintf("%s: etcd.service is not running: %s", h.Name, cmd))
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		if cause == nil {
			return &NotRestoredError{Left: left, Err: fmt.Errorf("starting etcd again: %w", err)}
		}
		return &NotRestoredError{Left: left, Err: fmt.Errorf("%w; starting etcd again: %w", cause, err)}
	}
	d.p.Infof("drill/put-back: %s", what)
	return cause
}
