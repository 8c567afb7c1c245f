package drill

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/internal/shell"
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

// restoreDrill is the restore drill (Restore): the disaster on every member, the restore from the
// newest snapshot (in place, or --onto other hosts while the members are fenced), RTO and RPO.
type restoreDrill struct {
	*env
	// snap is the newest snapshot preflight found.
	snap *SnapshotRef
}

func (*restoreDrill) checkSpec(*Options) error                        { return nil }
func (*restoreDrill) minHold(*Options) (time.Duration, string, error) { return 0, "", nil }
func (d *restoreDrill) header(rep *Report)                            { d.workloadHeader(rep) }
func (*restoreDrill) vipHolder() vipNeed                              { return vipNone }

// checkFlags checks (and defaults) the restore drill's flags.
func (*restoreDrill) checkFlags(o *Options) error {
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

// preflight refuses before anything is touched when no snapshot is newer than --max-rpo:
// the drill could only fail its RPO.
func (d *restoreDrill) preflight(ctx context.Context, _ *preflightState) error {
	snap, err := d.o.Restorer.Newest(ctx)
	if err != nil {
		return fmt.Errorf("drill/preflight: finding the newest snapshot: %w", err)
	}
	if snap == nil {
		return &RefusedError{Reasons: []string{"there is no complete snapshot of this cluster"},
			Fix: "take one with `hactl backup now` (or install a schedule with `hactl backup schedule`), then run the drill again"}
	}
	if age := time.Since(snap.Point()); age > d.o.MaxRPO {
		return &RefusedError{Reasons: []string{fmt.Sprintf("the newest snapshot %s (with its deltas) holds changes up to %s ago, longer than --max-rpo %s: a restore now could only miss the RPO", snap.Key, age.Round(time.Second), d.o.MaxRPO)},
			Fix: "take a snapshot (`hactl backup now`) or check the schedule (`hactl backup schedule --status`), then run the drill again"}
	}
	if d.o.Onto != nil {
		d.p.Infof("drill/preflight: the new hosts of %s (a dry run of bootstrap --restore-from)", d.o.OntoFile)
	}
	if err := d.o.Restorer.Preflight(ctx, snap); err != nil {
		return fmt.Errorf("drill/preflight: %w", err)
	}
	d.snap = snap
	return nil
}

func deltaText(s *SnapshotRef) string {
	if s.DeltasTo == 0 {
		return "; no deltas"
	}
	return fmt.Sprintf("; deltas to revision %d, the newest stored %s ago", s.DeltasTo, time.Since(s.DeltasAt).Round(time.Second))
}

// plan are the restore drill's plan lines.
func (d *restoreDrill) plan(*preflightState) []string {
	snap := d.snap
	var names []string
	for _, h := range d.c.EtcdHosts() {
		names = append(names, h.Name)
	}
	from := fmt.Sprintf("the newest snapshot at that moment and its deltas (now %s, revision %d, taken %s ago%s)", snap.Key, snap.Revision, time.Since(snap.TakenAt).Round(time.Second), deltaText(snap))
	if o := d.o.Onto; o != nil {
		var onto []string
		for _, h := range o.EtcdHosts() {
			onto = append(onto, h.Name)
		}
		after := "then unfence them and start etcd there again (the rehearsal ends with both clusters running; `hactl reset -f " + d.o.OntoFile + "` removes the new one)"
		if d.o.KeepFenced {
			after = "and leave them fenced (--keep-fenced): the new cluster takes over; unfence by hand with: " + unfenceText
		}
		return []string{
			fmt.Sprintf("fence the members of %s (%s): a systemd drop-in %s makes every start of etcd fail, reboots included", d.c.Metadata.Name, strings.Join(names, ", "), FenceDropIn),
			fmt.Sprintf("run the workload for %s, then declare the disaster (t0): kill etcd on EVERY member at once (SIGKILL; their data dirs are not touched)", d.o.Warmup),
			fmt.Sprintf("build cluster %s on %s (%s) from %s, as bootstrap --restore-from does; the workload then writes there", o.Metadata.Name, strings.Join(onto, ", "), d.o.OntoFile, from),
			fmt.Sprintf("measure RTO = t0 → the first write acknowledged by the new cluster (budget --max-rto %s) and RPO = t0 → the newest acknowledged write it holds (budget --max-rpo %s); readyz through a VIP is not measured onto other hosts", d.o.MaxRTO, d.o.MaxRPO),
			fmt.Sprintf("after the read-back, %s", after),
			"if the new cluster cannot be built, the old members are unfenced and etcd started again there",
		}
	}
	return []string{
		fmt.Sprintf("run the workload for %s, then declare the disaster (t0): kill etcd on EVERY member at once (%s; SIGKILL, the unit then held stopped)", d.o.Warmup, strings.Join(names, ", ")),
		fmt.Sprintf("restore the whole cluster from %s: every data dir moved aside (kept), every write since rolled back", from),
		fmt.Sprintf("measure RTO = t0 → the first write acknowledged by the restored cluster (budget --max-rto %s) and RPO = t0 → the newest acknowledged write the restored cluster holds (budget --max-rpo %s)", d.o.MaxRTO, d.o.MaxRPO),
		d.readyzPlan(),
		fmt.Sprintf("if the restore fails before touching a data dir, etcd is started again on every member; after that, hactl restore rolls every member back to its previous data dir"),
	}
}

// readyzPlan says whether readyz through the VIP is measured.
func (d *restoreDrill) readyzPlan() string {
	switch {
	case d.c.Spec.Kubernetes == nil || d.lbPlan == nil:
		return "no Kubernetes behind a VIP in the spec: only etcd's recovery is measured"
	case d.o.caFile() == "":
		return "Kubernetes runs behind the VIP, but without --ca-file (or spec.loadBalancer.healthCheck.caFile) readyz through it is not measured"
	}
	return fmt.Sprintf("also measure t0 → GET %s answering 200 (every %s, fresh connections; within --max-rto too), which includes the kube-apiservers' restart: the control planes are held during the restore (restore/hold, restore/release)", d.readyzURL(), PollInterval)
}
