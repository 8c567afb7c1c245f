package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
	"github.com/hactl/hactl/specload"
)

// Keys of spec.backup.credentialsSecret and spec.backup.objectStore.caSecret.
const (
	SecretAccessKeyID     = "accessKeyID"
	SecretSecretAccessKey = "secretAccessKey"
	SecretSessionToken    = "sessionToken"
)

// TimersLookBack is how far back the timers' snapshots are looked for (at least 2 × every).
const TimersLookBack = 2 * time.Hour

// pruneGrace is how old an orphan data object or an incomplete upload must be before the
// operator's prune removes it (`hactl backup prune`'s grace: a run in progress is never touched).
const pruneGrace = time.Hour

// backupResult is what one backup step did.
type backupResult struct {
	look observe.BackupLook
	// last is the newest snapshot the step took or found (nil: unchanged).
	last *hactlv1.SnapshotRef
	// taken is set when the step stored a snapshot.
	taken *backup.Metadata
	// took is how long the snapshot took.
	took time.Duration
	// listing is the bucket as the step last listed it (nil: not listed), for the EtcdSnapshot
	// sync; store is the store it came from.
	listing *backup.Listing
	store   backup.Store
}

// backupStep takes the snapshot due at now for ec when there is none yet: the slot now falls in
// (observe.DueSlot) is skipped when the status already records it; otherwise the object store is
// listed, and the slot's snapshot, when it is there (another replica took it before a takeover),
// is recorded instead of taken again. Snapshots of hactl's own timers in the last two intervals
// stop the operator's schedule (two schedules at once are refused). Otherwise the leader is
// snapshotted through backup.Take (streamed, verified on the fly against etcd's trailing sha256,
// compressed and encrypted as spec.backup says) under the slot's key, and the retention policy
// is applied after the success. Every failure is in the result's look, never an error: the next
// reconcile retries.
func (r *EtcdClusterReconciler) backupStep(ctx context.Context, ec *hactlv1.EtcdCluster, look observe.Look, now time.Time) backupResult {
	b := ec.Spec.Backup
	if b == nil {
		return backupResult{}
	}
	every := observe.Every(b)
	slot := observe.DueSlot(now, every)
	// Slot names sort as times (backup.TimeFormat): a recorded slot at or after the due one means
	// the due slot is taken (after every grew, the newest can be past the due slot's start).
	if last := ec.Status.LastSnapshot; last != nil && last.Slot >= slot && last.TakenBy == backup.TakenByOperator {
		return backupResult{}
	}
	store, err := r.openStore(ctx, ec)
	if err != nil {
		return backupResult{look: observe.BackupLook{Reason: observe.ReasonStoreUnavailable, Problem: err.Error()}}
	}
	prefix := b.ObjectStore.Prefix
	l, err := backup.List(ctx, store, prefix, ec.Name)
	if err != nil {
		return backupResult{look: observe.BackupLook{Reason: observe.ReasonStoreUnavailable, Problem: fmt.Sprintf("listing %s: %v", store, err)}}
	}
	res := backupResult{listing: l, store: store}
	if latest := l.Latest(); latest != nil {
		res.last = observe.Ref(latest)
	}
	// The timers may run at a longer interval than the operator: look back at least 2 h (hourly
	// timers stay seen; the operator resumes 2 h after the timers' last snapshot).
	if timers := observe.TimerSnapshots(l, now.Add(-max(2*every, TimersLookBack))); len(timers) > 0 {
		t := timers[len(timers)-1]
		res.look = observe.BackupLook{Reason: observe.ReasonTimersScheduled, Problem: fmt.Sprintf(
			"hactl backup schedule's timers also take snapshots (the newest: %s, slot %s, by member %s): two schedules at once is refused, so the operator takes none; disable the timers (hactl backup schedule --disable) or remove spec.backup from this EtcdCluster",
			t.Stem, t.Slot, t.Member)}
		return res
	}
	if observe.FindSlot(l, slot) != nil { // taken before a takeover: recorded (the newest), not taken again
		return res
	}
	if look.Status != nil && look.Status.ClusterID != "" && look.Status.ClusterID != ec.Spec.ClusterID {
		res.look = observe.BackupLook{Reason: observe.ReasonBackupFailed, Problem: fmt.Sprintf("no snapshot for slot %s: the members answer as etcd cluster %s, not spec.clusterID %s", slot, look.Status.ClusterID, ec.Spec.ClusterID)}
		return res
	}
	endpoint, member := leaderOf(look.Status)
	if endpoint == "" {
		res.look = observe.BackupLook{Reason: observe.ReasonBackupFailed, Problem: fmt.Sprintf("no snapshot for slot %s: no reachable leader", slot)}
		return res
	}
	cfg, err := r.clientTLS(ctx, ec)
	if err != nil {
		res.look = observe.BackupLook{Reason: observe.ReasonBackupFailed, Problem: err.Error()}
		return res
	}
	// A snapshot may take at most one interval: the next slot has its own.
	tctx, cancel := context.WithTimeout(ctx, every)
	defer cancel()
	cli, err := etcd.NewClientWithConfig(tctx, []string{endpoint}, cfg, r.DialTimeout)
	if err != nil {
		res.look = observe.BackupLook{Reason: observe.ReasonBackupFailed, Problem: err.Error()}
		return res
	}
	defer cli.Close()
	defer releaseSnapshotMemory()
	t0 := time.Now()
	m, err := backup.Take(tctx, cli, endpoint, store, backup.TakeOptions{
		Cluster: ec.Name, Prefix: prefix, Member: member, Slot: slot, Compression: b.Compression,
		Recipients: b.EncryptionRecipients, TakenBy: backup.TakenByOperator, HactlVersion: r.Version, Now: r.now,
		Progress: func(format string, args ...any) { log.FromContext(ctx).V(1).Info(fmt.Sprintf(format, args...)) },
	})
	if err != nil {
		res.look = observe.BackupLook{Reason: observe.ReasonBackupFailed, Problem: fmt.Sprintf("snapshot for slot %s of member %s: %v", slot, member, err)}
		return res
	}
	res.taken, res.took, res.last = m, time.Since(t0), observe.RefFromMetadata(m)
	res.listing = nil // until the listing below (the sync waits for one that holds the new snapshot)
	l, err = backup.List(ctx, store, prefix, ec.Name)
	if err != nil {
		return res
	}
	res.listing = l
	if policy := observe.Policy(b); policy != (backup.Policy{}) {
		if res.listing, err = prune(ctx, store, l, prefix, ec.Name, policy, now); err != nil {
			res.look = observe.BackupLook{Problem: fmt.Sprintf("snapshot %s stored, but pruning failed: %v", res.last.Name, err)}
		}
	}
	return res
}

// prune applies policy to the snapshots of the listing l and to the cluster's deltas (backup.Prune:
// the newest verified snapshot is always kept, the deltas ending before every kept snapshot go)
// with pruneGrace for incomplete uploads (one line per deletion at V(1), a summary at Info), and
// returns l without the snapshots it deleted (on an error: nil, the sync then waits for the next
// listing).
func prune(ctx context.Context, store backup.Store, l *backup.Listing, prefix, cluster string, policy backup.Policy, now time.Time) (*backup.Listing, error) {
	logger := log.FromContext(ctx)
	plan, err := backup.Prune(ctx, store, backup.RetentionOptions{Prefix: prefix, Cluster: cluster, Policy: policy, Now: now, Grace: pruneGrace, Listing: l},
		func(format string, args ...any) { logger.V(1).Info("prune: " + fmt.Sprintf(format, args...)) })
	if err != nil {
		return nil, err
	}
	if !plan.Empty() {
		logger.Info("prune: retention applied", "snapshots", len(plan.Deletions()), "deltas", len(plan.Deltas),
			"orphans", len(plan.Orphans), "incompleteUploads", len(plan.Incomplete))
	}
	return plan.Kept(), nil
}

// releaseSnapshotMemory gives the pages of a finished snapshot's buffers (its multipart part, the
// compressor's window: about as large as the DB, up to tens of MiB) back to the OS at once. They are
// garbage after the upload, but the Go runtime scavenges freed pages over minutes, so between
// snapshots an idle replica would keep the last one's peak resident (measured with bench/operator:
// resident memory p50 78 MiB against a 17.8 MiB heap in use). One forced collection per snapshot.
func releaseSnapshotMemory() { debug.FreeOSMemory() }

// leaderOf is the reachable leader's client URL and member name ("" without one).
func leaderOf(st *etcd.ClusterStatus) (endpoint, member string) {
	if st == nil {
		return "", ""
	}
	for _, ep := range st.Endpoints {
		if ep.Reachable && ep.IsLeader {
			return ep.Endpoint, ep.MemberName
		}
	}
	return "", ""
}

// openStore builds the object store client of ec's spec.backup from its Secrets. Errors name the
// Secret and the missing key, never a value.
func (r *EtcdClusterReconciler) openStore(ctx context.Context, ec *hactlv1.EtcdCluster) (backup.Store, error) {
	if r.OpenStore != nil {
		return r.OpenStore(ctx, ec)
	}
	b := ec.Spec.Backup
	creds, err := r.secret(ctx, ec.Namespace, b.CredentialsSecret.Name, "object store credentials", SecretAccessKeyID, SecretSecretAccessKey)
	if err != nil {
		return nil, err
	}
	o := b.ObjectStore
	cfg := backup.S3Config{Endpoint: o.Endpoint, Bucket: o.Bucket, Region: o.Region, Lookup: o.BucketLookup, PlainHTTP: o.PlainHTTP,
		Credentials: specload.BackupCredentials{AccessKeyID: string(creds.Data[SecretAccessKeyID]),
			SecretAccessKey: string(creds.Data[SecretSecretAccessKey]), SessionToken: string(creds.Data[SecretSessionToken])}}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if o.CASecret != nil {
		ca, err := r.secret(ctx, ec.Namespace, o.CASecret.Name, "object store CA", SecretCA)
		if err != nil {
			return nil, err
		}
		cfg.CAPEM = ca.Data[SecretCA]
	}
	s, err := backup.NewS3(cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// secret reads one Secret of namespace and checks that it holds keys.
func (r *EtcdClusterReconciler) secret(ctx context.Context, namespace, name, what string, keys ...string) (*corev1.Secret, error) {
	var s corev1.Secret
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	if err := r.Client.Get(ctx, nn, &s); err != nil {
		return nil, fmt.Errorf("%s Secret %s: %w", what, nn, err)
	}
	var missing []string
	for _, k := range keys {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s Secret %s has no %s (it needs %s)", what, nn, strings.Join(missing, ", "), strings.Join(keys, ", "))
	}
	return &s, nil
}
