// Package controller holds hactl-operator's reconcilers.
package controller

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
)

// Secret keys of spec.clientCertificateSecret (a kubernetes.io/tls Secret plus the CA).
const (
	SecretCA   = "ca.crt"
	SecretCert = corev1.TLSCertKey
	SecretKey  = corev1.TLSPrivateKeyKey
)

// EtcdClusterReconciler keeps each EtcdCluster's status true to its etcd cluster: on every
// change of the object and every RequeuePeriod (with 10% jitter; the cluster is outside
// Kubernetes), it reads the client certificate Secret, asks every member (etcd.StatusWithConfig)
// and writes what observe.Apply makes of it through the status subresource, retrying conflicts.
// An unreachable cluster or a refused certificate is a condition, never a failed reconcile. A
// second EtcdCluster of one cluster ID is marked Degraded and does nothing. Each phase change and
// condition flip is an event.
//
// +kubebuilder:rbac:groups=hactl.io,resources=etcdclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hactl.io,resources=etcdclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type EtcdClusterReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// RequeuePeriod is the period between looks (jittered by 10%).
	RequeuePeriod time.Duration
	// DialTimeout and RequestTimeout bound each member's connection and request.
	DialTimeout, RequestTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Version is recorded in the snapshots' metadata (hactlVersion).
	Version string
	// OpenStore, when set, replaces the S3 client spec.backup describes (tests).
	OpenStore func(ctx context.Context, ec *hactlv1.EtcdCluster) (backup.Store, error)

	// EtcdBinary is the etcd binary a heal installs on a spare (the image's).
	EtcdBinary string

	// mu guards backoff: per EtcdCluster, when maintenance may be tried again after a failure
	// (kept in memory: a new leader tries once at once).
	mu      sync.Mutex
	backoff map[string]time.Time

	// binOnce runs EtcdBinary --version once: binVersion is what it reports, binErr why not.
	binOnce    sync.Once
	binVersion string
	binErr     error
}

// SetupWithManager registers the reconciler: EtcdCluster changes that bump metadata.generation
// (spec changes; status writes do not retrigger it) and the periodic requeue.
func (r *EtcdClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&hactlv1.EtcdCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("etcdcluster").
		Complete(r)
}

// Reconcile looks at one EtcdCluster's etcd cluster and records what it saw. Errors: only those
// of the API server (reading the object, writing its status); etcd's are conditions.
func (r *EtcdClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var ec hactlv1.EtcdCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &ec); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	requeue := ctrl.Result{RequeueAfter: wait.Jitter(r.RequeuePeriod, 0.1)}
	if ec.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	now := r.now()

	var all hactlv1.EtcdClusterList
	if err := r.Client.List(ctx, &all); err != nil {
		return ctrl.Result{}, err
	}
	if owner, ok := observe.Owner(all.Items, ec.Spec.ClusterID); ok && (owner.Namespace != ec.Namespace || owner.Name != ec.Name) {
		return requeue, r.writeStatus(ctx, &ec, func(st *hactlv1.EtcdClusterStatus) {
			observe.MarkDuplicate(st, ec.Generation, ec.Spec.ClusterID, owner.Namespace+"/"+owner.Name, now)
		})
	}

	look := r.look(ctx, &ec)
	if look.Err != nil || look.CredentialsErr != nil {
		logger.V(1).Info("etcd cluster not fully seen", "error", errors.Join(look.CredentialsErr, look.Err))
	}
	bk := r.backupStep(ctx, &ec, look, now)
	if bk.listing != nil {
		if err := r.syncSnapshots(ctx, &ec, bk.listing); err != nil {
			logger.Error(err, "EtcdSnapshot sync")
		}
	}
	if ec.Spec.Backup != nil {
		every := observe.Every(ec.Spec.Backup)
		// Come back just after the next slot starts (the periodic look continues meanwhile), or at
		// once when a snapshot outlasted its slot and the slot due now has none yet.
		if next := observe.NextSlot(r.now(), every).Sub(r.now()) + slotDelay; next < requeue.RequeueAfter {
			requeue.RequeueAfter = next
		}
		if bk.taken != nil && bk.taken.Slot != observe.DueSlot(r.now(), every) {
			requeue.RequeueAfter = slotDelay
		}
	}
	r.backupEvents(&ec, bk)
	var hd observe.HealDecision
	if err := r.writeStatus(ctx, &ec, func(st *hactlv1.EtcdClusterStatus) {
		observe.Apply(st, ec.Spec, ec.Generation, look, now)
		if bk.last != nil {
			st.LastSnapshot = bk.last
		}
		if ec.Spec.Backup == nil {
			st.LastSnapshot = nil
		}
		observe.ApplyBackup(st, ec.Spec, ec.Generation, bk.look, r.now())
		observe.ApplyMaintenance(st, ec.Spec, ec.Generation, false, "", "", now)
		hd = planHeal(&ec, st, look, now)
	}); err != nil {
		return ctrl.Result{}, err
	}
	if hd.Action == observe.HealWait && !hd.Until.IsZero() {
		if next := hd.Until.Sub(r.now()) + slotDelay; next < requeue.RequeueAfter {
			requeue.RequeueAfter = max(next, slotDelay)
		}
	}
	if ec.Status.Healing != nil {
		// No maintenance while a member is being replaced: one membership change at a time.
		after, err := r.healStep(ctx, &ec)
		if err != nil {
			return ctrl.Result{}, err
		}
		if after > 0 && after < requeue.RequeueAfter {
			requeue.RequeueAfter = after
		} else if after == 0 {
			requeue.RequeueAfter = slotDelay // look again at once: the cluster changed
		}
		return requeue, nil
	}
	return requeue, r.maintenanceStep(ctx, &ec, look, now)
}

// slotDelay is how long after a slot's start the reconcile that takes its snapshot runs (a
// requeue that fires a little early would find the previous slot still current).
const slotDelay = 500 * time.Millisecond

// backupEvents counts the step in hactl_operator_snapshots_total and records a stored snapshot
// (Normal SnapshotTaken) and a problem (Warning with the reason).
func (r *EtcdClusterReconciler) backupEvents(ec *hactlv1.EtcdCluster, bk backupResult) {
	cluster := ec.Namespace + "/" + ec.Name
	if bk.taken != nil {
		metricSnapshots.WithLabelValues(cluster, "stored").Inc()
	}
	if bk.look.Reason == observe.ReasonBackupFailed {
		metricSnapshots.WithLabelValues(cluster, "failed").Inc()
	}
	if r.Recorder == nil {
		return
	}
	if m := bk.taken; m != nil {
		// Related is the slot's EtcdSnapshot (made by the sync, maybe not yet): the recorder folds
		// Events with the same regarding, related, reason and reporting instance into one series
		// whatever their notes, so without it each slot's Event would be counted into the first one's
		// series and the per-slot record (the Lease drill's proof of one snapshot per slot) lost.
		related := &hactlv1.EtcdSnapshot{TypeMeta: metav1.TypeMeta{APIVersion: hactlv1.GroupVersion.String(), Kind: "EtcdSnapshot"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: SnapshotObjectName(ec.Name, bk.last.Name)}}
		r.Recorder.Eventf(ec, related, corev1.EventTypeNormal, observe.EventSnapshotTaken, "Snapshot", "slot %s: member %s at revision %d, %d bytes stored as %s in %s",
			m.Slot, m.MemberName, m.Revision, m.StoredSizeBytes, m.Key, bk.took.Round(time.Millisecond))
	}
	if bk.look.Problem != "" {
		r.Recorder.Eventf(ec, nil, corev1.EventTypeWarning, cmp.Or(bk.look.Reason, "PruneFailed"), "Snapshot", "%s", bk.look.Problem)
	}
}

// look reads the client certificate and asks every member of ec.
func (r *EtcdClusterReconciler) look(ctx context.Context, ec *hactlv1.EtcdCluster) observe.Look {
	cfg, err := r.clientTLS(ctx, ec)
	if err != nil {
		return observe.Look{CredentialsErr: err}
	}
	endpoints := make([]string, 0, len(ec.Spec.Members))
	for _, m := range ec.Spec.Members {
		endpoints = append(endpoints, m.ClientURL)
	}
	st, err := etcd.StatusWithConfig(ctx, endpoints, cfg, r.DialTimeout, r.RequestTimeout)
	return observe.Look{Status: st, Err: err}
}

// clientTLS builds the client tls.Config from ec's client certificate Secret. Errors name the
// Secret and the missing or bad key.
func (r *EtcdClusterReconciler) clientTLS(ctx context.Context, ec *hactlv1.EtcdCluster) (*tls.Config, error) {
	name := types.NamespacedName{Namespace: ec.Namespace, Name: ec.Spec.ClientCertificateSecret.Name}
	var s corev1.Secret
	if err := r.Client.Get(ctx, name, &s); err != nil {
		return nil, fmt.Errorf("client certificate Secret %s: %w", name, err)
	}
	for _, k := range []string{SecretCA, SecretCert, SecretKey} {
		if len(s.Data[k]) == 0 {
			return nil, fmt.Errorf("client certificate Secret %s has no %s (it needs %s, %s and %s)", name, k, SecretCA, SecretCert, SecretKey)
		}
	}
	cfg, err := etcd.ConfigFromPEM(s.Data[SecretCA], s.Data[SecretCert], s.Data[SecretKey])
	if err != nil {
		return nil, fmt.Errorf("client certificate Secret %s: %w", name, err)
	}
	return cfg, nil
}

// writeStatus applies change to ec's status and writes it through the status subresource when it
// differs, re-reading the object on a conflict; it records an event for a phase change and for
// each condition whose status flipped.
func (r *EtcdClusterReconciler) writeStatus(ctx context.Context, ec *hactlv1.EtcdCluster, change func(*hactlv1.EtcdClusterStatus)) error {
	before := ec.Status.DeepCopy()
	var after *hactlv1.EtcdClusterStatus
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur hactlv1.EtcdCluster
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(ec), &cur); err != nil {
			return err
		}
		before = cur.Status.DeepCopy()
		change(&cur.Status)
		after = cur.Status.DeepCopy()
		if equality.Semantic.DeepEqual(before, after) {
			return nil
		}
		if err := r.Client.Status().Update(ctx, &cur); err != nil {
			return err
		}
		*ec = cur
		return nil
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	r.events(ec, before, after)
	if after != nil {
		recordMetrics(ec, after)
	}
	return nil
}

func (r *EtcdClusterReconciler) events(ec *hactlv1.EtcdCluster, before, after *hactlv1.EtcdClusterStatus) {
	if r.Recorder == nil || after == nil {
		return
	}
	if before.Phase != after.Phase {
		typ := corev1.EventTypeNormal
		if after.Phase == hactlv1.PhaseDegraded {
			typ = corev1.EventTypeWarning
		}
		from := before.Phase
		if from == "" {
			from = "(new)"
		}
		r.Recorder.Eventf(ec, nil, typ, "Phase"+string(after.Phase), "Observe", "phase %s → %s", from, after.Phase)
	}
	// An event per condition whose status or reason changed: a reason is a decision too (Healing
	// stays False from NoMemberLost through GracePeriod to QuorumLost).
	for _, c := range after.Conditions {
		old := meta.FindStatusCondition(before.Conditions, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		typ := corev1.EventTypeNormal
		if bad := (c.Type == hactlv1.ConditionAvailable || c.Type == hactlv1.ConditionBackupFresh) && c.Status == "False" ||
			(c.Type == hactlv1.ConditionDegraded || c.Type == hactlv1.ConditionQuorumAtRisk) && c.Status == "True"; bad {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(ec, nil, typ, c.Reason, "Observe", "%s=%s: %s", c.Type, c.Status, c.Message)
	}
}

func (r *EtcdClusterReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
