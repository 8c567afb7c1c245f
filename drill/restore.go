package drill

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// Restore is the disaster-recovery drill: with the workload running, every member's etcd is stopped
// (the disaster, t0), the whole cluster is restored from the newest snapshot, and the recovery time
// (RTO) and recovery point (RPO) are measured.
const Restore Kind = "restore"

// The bank case's recovery objectives, the defaults of --max-rto and --max-rpo for a restore drill.
const (
	DefaultRestoreMaxRTO = 2 * time.Minute
	DefaultRestoreMaxRPO = 5 * time.Minute
	// DefaultRestoreWarmup is how long the workload runs before the disaster.
	DefaultRestoreWarmup = 5 * time.Second
	// restoreRecoveryTimeout bounds the wait, after the restore, for the workload's first
	// acknowledged write.
	restoreRecoveryTimeout = time.Minute
)

// SnapshotRef is the snapshot a restore drill restores from.
type SnapshotRef struct {
	// Key is its data object (or the local file).
	Key string `json:"key"`
	// Revision is its etcd revision; TakenAt when it was started (the metadata's startedAt): it holds
	// every write acknowledged before then.
	Revision int64     `json:"revision"`
	TakenAt  time.Time `json:"takenAt"`
	// DeltasTo and DeltasAt are the revision the delta snapshots continuing it reach and when the
	// newest of them was stored (zero: no delta).
	DeltasTo int64     `json:"deltasTo,omitempty"`
	DeltasAt time.Time `json:"deltasAt,omitzero"`
}

// Point is the newest moment the snapshot and its deltas hold: the newest delta's completion, else
// the snapshot's start.
func (s SnapshotRef) Point() time.Time {
	if s.DeltasAt.After(s.TakenAt) {
		return s.DeltasAt
	}
	return s.TakenAt
}

// RestoreRun is what a Restorer's restore did.
type RestoreRun struct {
	Snapshot SnapshotRef
	// Fetch is the download, decryption, decompression and verification on this machine; Restore
	// the restore itself (ship, stop, data, start, wait, verify).
	Fetch, Restore time.Duration
	// Revision is the restored cluster's revision; Deltas the delta snapshots applied.
	Revision int64
	Deltas   int
}

// Restorer finds and restores snapshots for the restore drill (cmd/hactl wires the backup store
// and `hactl restore`'s phases).
type Restorer interface {
	// Newest returns the newest complete snapshot a restore would use now; nil when there is none.
	Newest(ctx context.Context) (*SnapshotRef, error)
	// Restore restores every member from the newest snapshot (no confirmation: the drill's plan was
	// confirmed), moving the data dirs aside. A restore that fails after touching a data dir puts the
	// previous ones back and starts etcd (hactl restore's rollback).
	Restore(ctx context.Context) (*RestoreRun, error)
}

// RestoreFigures are a restore drill's own figures (times in ms; offsets from t0).
type RestoreFigures struct {
	Snapshot SnapshotRef `json:"snapshot"`
	// SnapshotAgeMs is t0 minus the restored point (SnapshotRef.Point: the newest delta's completion,
	// else the snapshot's start).
	SnapshotAgeMs float64 `json:"snapshotAgeMs"`
	// FetchMs and RestoreMs are the Restorer's steps (fetch includes applying Deltas delta
	// snapshots); RestoredRevision the cluster's revision after.
	Deltas           int     `json:"deltas"`
	FetchMs          float64 `json:"fetchMs"`
	RestoreMs        float64 `json:"restoreMs"`
	RestoredRevision int64   `json:"restoredRevision"`
	// RPOMs is t0 minus the acknowledgement of the newest write acknowledged before t0 that the
	// restored cluster holds (RPOFrom "workload"); when it holds none of the workload's writes (the
	// restored point predates the workload), t0 minus SnapshotRef.Point (RPOFrom "snapshot").
	RPOMs   float64 `json:"rpoMs"`
	RPOFrom string  `json:"rpoFrom"`
	// LostWrites counts writes acknowledged before t0 that the restore gave up (expected: those after
	// the snapshot); LostFromMs and LostToMs are how long before t0 the oldest and newest of them
	// were acknowledged.
	LostWrites int      `json:"lostWrites"`
	LostFromMs *float64 `json:"lostFromMs,omitempty"`
	LostToMs   *float64 `json:"lostToMs,omitempty"`
	// ReadyzRTOMs is t0 → the GET /readyz through the VIP that answered 200 after the last failed
	// one (Kubernetes on the cluster, with the kube-apiserver CA: --ca-file or
	// spec.loadBalancer.healthCheck.caFile): readyz for good, not its first 200 (measured: the
	// kube-apiserver answers 200 again for a moment while etcd is still down); nil when not measured
	// or not settled (Readyz says which, and what the probe saw).
	ReadyzRTOMs *float64           `json:"readyzRTOMs,omitempty"`
	Readyz      *probe.OutageStats `json:"readyz,omitempty"`
	// Verification is the read-back.
	Verification *workload.RestoreVerification `json:"verification,omitempty"`
}

// validateRestore is Validate for the restore drill.
func (o *Options) validateRestore() error {
	if o.Restorer == nil {
		return &InputError{Err: fmt.Errorf("drill restore: no snapshot store: set spec.backup")}
	}
	if o.Count != 1 {
		return &InputError{Err: fmt.Errorf("--count %d: a restore drill runs once (each run rolls the cluster back to a snapshot)", o.Count)}
	}
	if o.MaxRTO == 0 {
		o.MaxRTO = DefaultRestoreMaxRTO
	}
	if o.MaxRPO == 0 {
		o.MaxRPO = DefaultRestoreMaxRPO
	}
	if o.MaxRPO < 0 {
		return &InputError{Err: fmt.Errorf("--max-rpo %s: must be a positive duration, e.g. 5m", o.MaxRPO)}
	}
	if o.Warmup == 0 {
		o.Warmup = DefaultRestoreWarmup
	}
	o.Hold = 0 // no fault is held: the restore ends it
	if o.Warmup < time.Second {
		return &InputError{Err: fmt.Errorf("--warmup %s: at least 1s, so that the workload has acknowledged writes before the disaster", o.Warmup)}
	}
	if len(o.Cluster.EtcdHosts()) == 0 {
		return &InputError{Err: fmt.Errorf("spec.hosts: no host with role etcd: nothing to restore")}
	}
	return nil
}

// restorePreflight refuses before anything is touched when no snapshot is newer than --max-rpo:
// the drill could only fail its RPO.
func (r *runner) restorePreflight(ctx context.Context) (*SnapshotRef, error) {
	snap, err := r.o.Restorer.Newest(ctx)
	if err != nil {
		return nil, fmt.Errorf("drill/preflight: finding the newest snapshot: %w", err)
	}
	if snap == nil {
		return nil, &RefusedError{Reasons: []string{"there is no complete snapshot of this cluster"},
			Fix: "take one with `hactl backup now` (or install a schedule with `hactl backup schedule`), then run the drill again"}
	}
	if age := time.Since(snap.Point()); age > r.o.MaxRPO {
		return nil, &RefusedError{Reasons: []string{fmt.Sprintf("the newest snapshot %s (with its deltas) holds changes up to %s ago, longer than --max-rpo %s: a restore now could only miss the RPO", snap.Key, age.Round(time.Second), r.o.MaxRPO)},
			Fix: "take a snapshot (`hactl backup now`) or check the schedule (`hactl backup schedule --status`), then run the drill again"}
	}
	return snap, nil
}

func deltaText(s *SnapshotRef) string {
	if s.DeltasTo == 0 {
		return "; no deltas"
	}
	return fmt.Sprintf("; deltas to revision %d, the newest stored %s ago", s.DeltasTo, time.Since(s.DeltasAt).Round(time.Second))
}

// restorePlan are the restore drill's plan lines.
func (r *runner) restorePlan(snap *SnapshotRef) []string {
	var names []string
	for _, h := range r.c.EtcdHosts() {
		names = append(names, h.Name)
	}
	return []string{
		fmt.Sprintf("run the workload for %s, then declare the disaster (t0): kill etcd on EVERY member at once (%s; SIGKILL, the unit then held stopped)", r.o.Warmup, strings.Join(names, ", ")),
		fmt.Sprintf("restore the whole cluster from the newest snapshot at that moment and its deltas (now %s, revision %d, taken %s ago%s): every data dir moved aside (kept), every write since rolled back",
			snap.Key, snap.Revision, time.Since(snap.TakenAt).Round(time.Second), deltaText(snap)),
		fmt.Sprintf("measure RTO = t0 → the first write acknowledged by the restored cluster (budget --max-rto %s) and RPO = t0 → the newest acknowledged write the restored cluster holds (budget --max-rpo %s)", r.o.MaxRTO, r.o.MaxRPO),
		r.readyzPlan(),
		fmt.Sprintf("if the restore fails before touching a data dir, etcd is started again on every member; after that, hactl restore rolls every member back to its previous data dir"),
	}
}

// readyzPlan says whether readyz through the VIP is measured.
func (r *runner) readyzPlan() string {
	switch {
	case r.c.Spec.Kubernetes == nil || r.lbPlan == nil:
		return "no Kubernetes behind a VIP in the spec: only etcd's recovery is measured"
	case r.o.caFile() == "":
		return "Kubernetes runs behind the VIP, but without --ca-file (or spec.loadBalancer.healthCheck.caFile) readyz through it is not measured"
	}
	return fmt.Sprintf("also measure t0 → GET %s answering 200 (every %s, fresh connections; within --max-rto too); the kube-apiservers are not restarted", r.readyzURL(), PollInterval)
}

// restoreIteration runs the restore drill: workload, disaster, restore, recovery, read-back.
func (r *runner) restoreIteration(ctx context.Context) (*Iteration, error) {
	it := &Iteration{N: 1, Fault: "etcd killed on every member at once (SIGKILL, then the unit stopped)"}
	members := r.c.EtcdHosts()
	for _, h := range members {
		it.Targets = append(it.Targets, h.Name)
	}
	cli, err := etcd.NewClient(ctx, etcd.ClientURLs(mustMembers(r.c)), r.files, time.Second, r.o.EtcdDial)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	mctx := context.WithoutCancel(ctx)
	// With Kubernetes behind the VIP, readyz through it is the recovery a user sees.
	var rz *probe.ReadyzRun
	if r.c.Spec.Kubernetes != nil && r.lbPlan != nil && r.o.caFile() != "" {
		cfg, err := r.readyzTLS()
		if err != nil {
			return nil, err
		}
		if rz, err = probe.StartReadyz(mctx, probe.ReadyzConfig{URL: r.readyzURL(), TLS: cfg, Interval: PollInterval, Timeout: readyzTimeout}); err != nil {
			return nil, err
		}
		defer rz.Stop()
	}
	prefix := workloadPrefix(r.report.ID, 1)
	// No reads: after a restore, a read of a write the restore gave up finds it missing by design;
	// the read-back (VerifyRestore) is the proof.
	wl, err := workload.Start(mctx, workload.Config{Client: cli, Prefix: prefix, Rate: r.o.Rate, ReadRate: -1, RequestTimeout: r.o.RequestTimeout})
	if err != nil {
		return nil, err
	}
	if !sleepCtx(ctx, r.o.Warmup) {
		wl.Stop()
		return nil, fmt.Errorf("drill interrupted before the disaster (nothing was changed): %w", ctx.Err())
	}

	// The disaster: every member killed in parallel, as a crash would (a graceful stop first tries
	// to hand leadership over, which takes seconds while the peers stop too); the unit is then held
	// stopped. t0 is when the last kill returned.
	r.p.Infof("drill/disaster: killing etcd on %s", strings.Join(it.Targets, ", "))
	var mu sync.Mutex
	var first, t0 time.Time
	stopErr := provision.ForEach(mctx, members, 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		sent := time.Now()
		_, err := r.hosts.run(ctx, h.Name, "drill/disaster", "systemctl kill --signal=SIGKILL etcd.service 2>/dev/null || true; systemctl stop etcd.service")
		done := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() || sent.Before(first) {
			first = sent
		}
		if done.After(t0) {
			t0 = done
		}
		return err
	})
	it.FaultAt, it.FaultUncertaintyMs = wallOf(t0), ms(t0.Sub(first))
	if stopErr != nil {
		wl.Stop()
		return it, r.restartEtcd(fmt.Errorf("drill/disaster: %w", stopErr))
	}

	r.p.Infof("drill/restore: restoring every member from the newest snapshot")
	run, rerr := r.o.Restorer.Restore(mctx)
	restored := time.Now()
	if rerr != nil {
		wl.Stop()
		return it, r.restartEtcd(fmt.Errorf("drill/restore: %w", rerr))
	}
	fig := &RestoreFigures{Snapshot: run.Snapshot, SnapshotAgeMs: ms(t0.Sub(run.Snapshot.Point())), Deltas: run.Deltas, FetchMs: ms(run.Fetch), RestoreMs: ms(run.Restore), RestoredRevision: run.Revision}
	it.Restore = fig
	it.PutBackMs = ms(restored.Sub(t0))

	r.p.Infof("drill/recovery: waiting (at most %s) for the workload's first write acknowledged by the restored cluster", restoreRecoveryTimeout)
	if err := wait.PollUntilContextTimeout(mctx, PollInterval, restoreRecoveryTimeout, false, func(context.Context) (bool, error) {
		return wl.Progress().LastAck.After(t0), nil
	}); err != nil {
		it.Notes = append(it.Notes, fmt.Sprintf("no write was acknowledged within %s of the restore's end", restoreRecoveryTimeout))
	}
	if rz != nil {
		r.p.Infof("drill/recovery: waiting (at most %s) for readyz through the VIP", restoreRecoveryTimeout)
		if err := wait.PollUntilContextTimeout(mctx, PollInterval, restoreRecoveryTimeout, false, func(context.Context) (bool, error) {
			return probe.Outage(rz.Samples(), t0).Settled, nil
		}); err != nil {
			it.Notes = append(it.Notes, fmt.Sprintf("readyz through the VIP did not answer 200 within %s of the restore's end", restoreRecoveryTimeout))
		}
	}
	sleepCtx(context.Background(), settle)
	rec := wl.Stop()
	if rz != nil {
		out := probe.Outage(rz.Stop(), t0)
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

	vctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ver, verr := workload.VerifyRestore(vctx, cli, rec, t0)
	if verr != nil {
		it.Failures = append(it.Failures, fmt.Sprintf("reading the acknowledged writes back: %v", verr))
		return it, nil
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
	if _, err := workload.Cleanup(vctx, cli, prefix); err != nil {
		r.p.Warnf("drill: deleting the workload's keys under %s: %v (`hactl drill cleanup` deletes them)", prefix, err)
	}
	return it, nil
}

// restartEtcd starts etcd on every member after the drill failed before the restore changed
// anything (or after hactl restore's rollback, where it is already running: start is a no-op), and
// returns cause, or a *NotRestoredError when some member could not be started.
func (r *runner) restartEtcd(cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var left []string
	err := provision.ForEach(ctx, r.c.EtcdHosts(), 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		_, err := r.hosts.run(ctx, h.Name, "drill/put-back", "systemctl start etcd.service")
		if err != nil {
			mu.Lock()
			left = append(left, fmt.Sprintf("%s: etcd.service is not running: systemctl start etcd.service", h.Name))
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return &NotRestoredError{Left: left, Err: fmt.Errorf("%w; starting etcd again: %w", cause, err)}
	}
	r.p.Infof("drill/put-back: etcd started again on every member")
	return cause
}
