package drill

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
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
	// Fetch is finding the snapshot (listing, metadata) and, when it is not left for the members to
	// fetch themselves, its download, decryption, decompression, verification and delta replay on
	// this machine; Restore the restore itself (ship, whose download then counts here, stop, data,
	// start, wait, verify).
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
	// Preflight checks, before anything is touched, what the restore will need besides the
	// snapshot: with --onto, the new hosts (reachable, fit, empty: bootstrap --restore-from's
	// checks, dry run).
	Preflight(ctx context.Context, snap *SnapshotRef) error
	// Restore restores every member from the newest snapshot (no confirmation: the drill's plan was
	// confirmed), moving the data dirs aside. A restore that fails after touching a data dir puts the
	// previous ones back and starts etcd (hactl restore's rollback). With --onto, it bootstraps the
	// new cluster from the snapshot instead (the drilled cluster's data dirs are not touched).
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
	// Onto is the cluster restored onto other hosts (--onto; empty: in place); Fenced the drilled
	// cluster's members left fenced after the drill (--keep-fenced).
	Onto   string   `json:"onto,omitempty"`
	Fenced []string `json:"fenced,omitempty"`
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
	if o.Onto == nil {
		if o.KeepFenced {
			return &InputError{Err: errors.New("--keep-fenced: only a drill --onto other hosts fences the members; drop the flag or add --onto")}
		}
		return nil
	}
	return validateOnto(o.Cluster, o.Onto, o.OntoFile)
}

// validateOnto checks the --onto spec against the drilled cluster's: other hosts (no name or
// address in common: the old members are fenced while the new ones are built), its own state dir
// (its own CA and member records), etcd members, and no Kubernetes (the drill rebuilds etcd and its
// load balancer; kubeadm on the new hosts is not part of it). Errors: *InputError naming the field.
func validateOnto(old, onto *v1alpha1.Cluster, file string) error {
	if len(onto.EtcdHosts()) == 0 {
		return &InputError{Err: fmt.Errorf("--onto %s: spec.hosts has no host with role etcd: nothing to restore onto", file)}
	}
	for i, h := range onto.Spec.Hosts {
		for _, oh := range old.Spec.Hosts {
			if h.Name == oh.Name || h.Address == oh.Address {
				return &InputError{Err: fmt.Errorf("--onto %s: spec.hosts[%d] (%s, %s) is also host %s (%s) of cluster %s: --onto rebuilds the cluster on OTHER hosts while the old ones are fenced; list only hosts outside the drilled cluster",
					file, i, h.Name, h.Address, oh.Name, oh.Address, old.Metadata.Name)}
			}
		}
	}
	if onto.Spec.StateDir == old.Spec.StateDir {
		return &InputError{Err: fmt.Errorf("--onto %s: spec.stateDir %s is the drilled cluster's own: the new cluster needs its own (its own CA, tokens and member records); set another spec.stateDir there", file, onto.Spec.StateDir)}
	}
	if ol, nl := old.ManagedLB(), onto.ManagedLB(); ol != nil && nl != nil {
		op, oerr := netip.ParsePrefix(ol.VIP)
		np, nerr := netip.ParsePrefix(nl.VIP)
		switch {
		case oerr != nil || nerr != nil:
		case op.Addr() == np.Addr():
			return &InputError{Err: fmt.Errorf("--onto %s: spec.loadBalancer.vip %s is cluster %s's VIP too: its load balancers are not fenced and both clusters run after the rehearsal, so keepalived on both sides would claim it; give the new site its own VIP", file, nl.VIP, old.Metadata.Name)}
		case ol.VirtualRouterID == nl.VirtualRouterID && op.Masked() == np.Masked():
			return &InputError{Err: fmt.Errorf("--onto %s: spec.loadBalancer.virtualRouterID %d is cluster %s's too, on the same subnet %s: VRRP routers with one ID on one segment fight over it; set another virtualRouterID there", file, nl.VirtualRouterID, old.Metadata.Name, np.Masked())}
		}
	}
	if onto.Spec.Kubernetes != nil {
		return &InputError{Err: fmt.Errorf("--onto %s: spec.kubernetes is set: a restore drill onto other hosts rebuilds etcd (and its load balancer), not Kubernetes; remove spec.kubernetes from that spec", file)}
	}
	return nil
}

// FenceDropIn is the systemd drop-in that fences an etcd member during (and, with --keep-fenced,
// after) a restore drill --onto other hosts: its AssertPathExists on a path that never exists makes
// every start of etcd.service fail ("Assertion failed") until the file is removed, after a reboot
// too, so the old cluster cannot come back next to the one restored from its data.
const FenceDropIn = "/etc/systemd/system/etcd.service.d/50-hactl-fenced.conf"

// fenceCommand installs FenceDropIn (temp + rename) naming the drill and the cluster the data is
// restored onto. A running etcd is not touched: assertions are checked at start only.
func fenceCommand(drillID, onto string) string {
	body := fmt.Sprintf("# Written by hactl drill restore %s: this member's cluster was restored onto cluster %s on other hosts.\n"+
		"# etcd must not start here again. To unfence: %s\n"+
		"[Unit]\nAssertPathExists=/nonexistent/hactl-fenced-by-drill-%s\n", drillID, onto, unfenceText, drillID)
	q := shell.Quote
	return strings.Join([]string{
		"set -eu",
		"mkdir -p " + q(path.Dir(FenceDropIn)),
		fmt.Sprintf("printf '%%s' %s > %s", q(body), q(FenceDropIn+".tmp")),
		fmt.Sprintf("mv %s %s", q(FenceDropIn+".tmp"), q(FenceDropIn)),
		"systemctl daemon-reload",
	}, "\n")
}

// unfenceCommand removes FenceDropIn and starts etcd again.
const unfenceCommand = "rm -f " + FenceDropIn + " && systemctl daemon-reload && systemctl start etcd.service"

// unfenceText is how a user unfences a member by hand.
const unfenceText = "rm " + FenceDropIn + "; systemctl daemon-reload; systemctl start etcd.service"

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
	if r.o.Onto != nil {
		r.p.Infof("drill/preflight: the new hosts of %s (a dry run of bootstrap --restore-from)", r.o.OntoFile)
	}
	if err := r.o.Restorer.Preflight(ctx, snap); err != nil {
		return nil, fmt.Errorf("drill/preflight: %w", err)
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
	from := fmt.Sprintf("the newest snapshot at that moment and its deltas (now %s, revision %d, taken %s ago%s)", snap.Key, snap.Revision, time.Since(snap.TakenAt).Round(time.Second), deltaText(snap))
	if o := r.o.Onto; o != nil {
		var onto []string
		for _, h := range o.EtcdHosts() {
			onto = append(onto, h.Name)
		}
		after := "then unfence them and start etcd there again (the rehearsal ends with both clusters running; `hactl reset -f " + r.o.OntoFile + "` removes the new one)"
		if r.o.KeepFenced {
			after = "and leave them fenced (--keep-fenced): the new cluster takes over; unfence by hand with: " + unfenceText
		}
		return []string{
			fmt.Sprintf("fence the members of %s (%s): a systemd drop-in %s makes every start of etcd fail, reboots included", r.c.Metadata.Name, strings.Join(names, ", "), FenceDropIn),
			fmt.Sprintf("run the workload for %s, then declare the disaster (t0): kill etcd on EVERY member at once (SIGKILL; their data dirs are not touched)", r.o.Warmup),
			fmt.Sprintf("build cluster %s on %s (%s) from %s, as bootstrap --restore-from does; the workload then writes there", o.Metadata.Name, strings.Join(onto, ", "), r.o.OntoFile, from),
			fmt.Sprintf("measure RTO = t0 → the first write acknowledged by the new cluster (budget --max-rto %s) and RPO = t0 → the newest acknowledged write it holds (budget --max-rpo %s); readyz through a VIP is not measured onto other hosts", r.o.MaxRTO, r.o.MaxRPO),
			fmt.Sprintf("after the read-back, %s", after),
			"if the new cluster cannot be built, the old members are unfenced and etcd started again there",
		}
	}
	return []string{
		fmt.Sprintf("run the workload for %s, then declare the disaster (t0): kill etcd on EVERY member at once (%s; SIGKILL, the unit then held stopped)", r.o.Warmup, strings.Join(names, ", ")),
		fmt.Sprintf("restore the whole cluster from %s: every data dir moved aside (kept), every write since rolled back", from),
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
	if r.o.Onto != nil {
		it.Fault = "every member fenced, then etcd killed on all of them at once; restored onto cluster " + r.o.Onto.Metadata.Name
	}
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
	if r.o.Onto == nil && r.c.Spec.Kubernetes != nil && r.lbPlan != nil && r.o.caFile() != "" {
		cfg, err := r.readyzTLS()
		if err != nil {
			return nil, err
		}
		if rz, err = probe.StartReadyz(mctx, probe.ReadyzConfig{URL: r.readyzURL(), TLS: cfg, Interval: PollInterval, Timeout: readyzTimeout}); err != nil {
			return nil, err
		}
		defer rz.Stop()
	}
	if r.o.Onto != nil {
		r.p.Infof("drill/fence: %s on %s", FenceDropIn, strings.Join(it.Targets, ", "))
		if err := provision.ForEach(mctx, members, 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
			_, err := r.hosts.run(ctx, h.Name, "drill/fence", fenceCommand(r.report.ID, r.o.Onto.Metadata.Name))
			return err
		}); err != nil {
			return nil, r.restartEtcd(fmt.Errorf("drill/fence: %w", err))
		}
	}
	prefix := workloadPrefix(r.report.ID, 1)
	// No reads: after a restore, a read of a write the restore gave up finds it missing by design;
	// the read-back (VerifyRestore) is the proof.
	wl, err := workload.Start(mctx, workload.Config{Client: cli, Prefix: prefix, Rate: r.o.Rate, ReadRate: -1, RequestTimeout: r.o.RequestTimeout})
	if err != nil {
		return nil, r.unfence(err)
	}
	if !sleepCtx(ctx, r.o.Warmup) {
		wl.Stop()
		return nil, r.unfence(fmt.Errorf("drill interrupted before the disaster (etcd was not stopped): %w", ctx.Err()))
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
		return it, r.restoreFailed(mctx, it, fmt.Errorf("drill/restore: %w", rerr))
	}
	fig := &RestoreFigures{Snapshot: run.Snapshot, SnapshotAgeMs: ms(t0.Sub(run.Snapshot.Point())), Deltas: run.Deltas, FetchMs: ms(run.Fetch), RestoreMs: ms(run.Restore), RestoredRevision: run.Revision}
	it.Restore = fig
	it.PutBackMs = ms(restored.Sub(t0))
	vcli := cli // the restored cluster
	if o := r.o.Onto; o != nil {
		fig.Onto = o.Metadata.Name
		ncli, err := etcd.NewClient(mctx, etcd.ClientURLs(mustMembers(o)), etcd.HactlClientTLS(o), time.Second, r.ontoDial)
		if err != nil {
			wl.Stop()
			return it, r.restoreFailed(mctx, it, fmt.Errorf("drill/recovery: a client of the new cluster %s: %w", o.Metadata.Name, err))
		}
		defer ncli.Close()
		wl.Retarget(ncli)
		vcli = ncli
		it.Notes = append(it.Notes, fmt.Sprintf("cluster %s was built from the snapshot on %s and keeps running: `hactl reset -f %s` removes it", o.Metadata.Name, strings.Join(hostNames(o.EtcdHosts()), ", "), r.o.OntoFile))
	}

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
	ver, verr := workload.VerifyRestore(vctx, vcli, rec, t0)
	if verr != nil {
		it.Failures = append(it.Failures, fmt.Sprintf("reading the acknowledged writes back: %v", verr))
		return it, r.afterOnto(vctx, it, cli, prefix)
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
	if _, err := workload.Cleanup(vctx, vcli, prefix); err != nil {
		r.p.Warnf("drill: deleting the workload's keys under %s: %v (`hactl drill cleanup` deletes them)", prefix, err)
	}
	return it, r.afterOnto(vctx, it, cli, prefix)
}

// afterOnto ends a drill --onto other hosts: unless --keep-fenced, the drilled cluster's members are
// unfenced and etcd started again there, and the workload's keys written before t0 deleted from it
// (retried until ctx ends: the old cluster elects a leader first); with --keep-fenced they are listed
// as fenced. Errors: a member that could not be unfenced (*NotRestoredError).
func (r *runner) afterOnto(ctx context.Context, it *Iteration, cli *clientv3.Client, prefix string) error {
	if r.o.Onto == nil {
		return nil
	}
	names := hostNames(r.c.EtcdHosts())
	if r.o.KeepFenced {
		it.Restore.Fenced = names
		it.Notes = append(it.Notes, fmt.Sprintf("%s left fenced (--keep-fenced); to unfence a member: %s", strings.Join(names, ", "), unfenceText))
		return nil
	}
	if err := r.restartEtcd(nil); err != nil {
		return err
	}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := workload.Cleanup(cctx, cli, prefix)
		return err == nil, nil
	})
	if err != nil {
		r.p.Warnf("drill: deleting the workload's keys under %s from cluster %s: %v (`hactl drill cleanup` deletes them)", prefix, r.c.Metadata.Name, err)
	}
	it.Notes = append(it.Notes, fmt.Sprintf("%s unfenced and etcd started again there: cluster %s runs as before the drill", strings.Join(names, ", "), r.c.Metadata.Name))
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
func (r *runner) restoreFailed(ctx context.Context, it *Iteration, cause error) error {
	o := r.o.Onto
	if o == nil {
		return r.restartEtcd(cause)
	}
	it.Notes = append(it.Notes, fmt.Sprintf("what was built of cluster %s on %s: `hactl reset -f %s` removes it", o.Metadata.Name, strings.Join(hostNames(o.EtcdHosts()), ", "), r.o.OntoFile))
	if r.o.KeepFenced {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := etcd.StatusWithTimeout(sctx, etcd.ClientURLs(mustMembers(o)), etcd.HactlClientTLS(o), 3*time.Second, 3*time.Second, r.ontoDial)
		cancel()
		if err == nil && st.ClusterID != "" {
			names := hostNames(r.c.EtcdHosts())
			it.Notes = append(it.Notes, fmt.Sprintf("cluster %s (%s) answers: %s left fenced (--keep-fenced); to unfence a member: %s", o.Metadata.Name, st.ClusterID, strings.Join(names, ", "), unfenceText))
			return fmt.Errorf("%w; %s left fenced (--keep-fenced) while cluster %s answers; to unfence a member: %s", cause, strings.Join(names, ", "), o.Metadata.Name, unfenceText)
		}
	}
	return r.restartEtcd(cause)
}

// unfence returns cause once the members are unfenced (--onto; etcd still runs there: start is a
// no-op), and cause as is in place (nothing was changed).
func (r *runner) unfence(cause error) error {
	if r.o.Onto == nil {
		return cause
	}
	return r.restartEtcd(cause)
}

// restartEtcd starts etcd on every member after the drill failed before the restore changed
// anything (or after hactl restore's rollback, where it is already running: start is a no-op), and
// returns cause, or a *NotRestoredError when some member could not be started. With --onto, the
// members are unfenced first (afterOnto calls it with a nil cause once the drill has measured).
func (r *runner) restartEtcd(cause error) error {
	cmd, what := "systemctl start etcd.service", "etcd started again on every member"
	if r.o.Onto != nil {
		cmd, what = unfenceCommand, "every member unfenced and etcd started again"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var left []string
	err := provision.ForEach(ctx, r.c.EtcdHosts(), 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		_, err := r.hosts.run(ctx, h.Name, "drill/put-back", cmd)
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
	r.p.Infof("drill/put-back: %s", what)
	return cause
}
