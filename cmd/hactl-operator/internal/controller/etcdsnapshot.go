package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
)

// LabelCluster is the label naming an EtcdSnapshot's EtcdCluster (the sync lists by it).
const LabelCluster = "hactl.io/cluster"

// Reasons of EtcdSnapshot conditions and events.
const (
	ReasonStored           = "Stored"
	ReasonNotInBucket      = "NotInBucket"
	ReasonTakeFailed       = "SnapshotFailed"
	ReasonDeletionBlocked  = "DeletionBlocked"
	ReasonNewestVerified   = "NewestVerifiedKept"
	ReasonDeletedInBucket  = "DeletedFromBucket"
	ReasonRetainedInBucket = "RetainedInBucket"
)

// OnDemandTimeout bounds one snapshot taken for an EtcdSnapshot without a key.
const OnDemandTimeout = 15 * time.Minute

// Phases of an EtcdSnapshot.
const (
	SnapshotPending = "Pending"
	SnapshotReady   = "Ready"
	SnapshotFailed  = "Failed"
)

// EtcdSnapshotReconciler keeps each EtcdSnapshot true to its snapshot in the bucket: one created
// without spec.key is a snapshot asked for now (taken from the leader through backup.Take, then
// spec.key is set to its stem); one with a key gets its status (time, revision, size, sha256,
// verified, encrypted) from the bucket. Finalizer hactl.io/snapshot-protection: deleting the
// object deletes the snapshot from the bucket only with deletionPolicy Delete, never the newest
// verified one (the object goes, the snapshot stays, with a Warning event); a failed deletion keeps
// the finalizer and retries with backoff. The objects of snapshots taken by a schedule are made by
// the EtcdCluster reconciler's sync (syncSnapshots).
//
// +kubebuilder:rbac:groups=hactl.io,resources=etcdsnapshots,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=hactl.io,resources=etcdsnapshots/status,verbs=get;update;patch
type EtcdSnapshotReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Clusters gives the object store, the client certificate, timeouts and the version.
	Clusters *EtcdClusterReconciler
}

// SetupWithManager registers the reconciler for EtcdSnapshots.
func (r *EtcdSnapshotReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&hactlv1.EtcdSnapshot{}).Named("etcdsnapshot").Complete(r)
}

// Reconcile handles one EtcdSnapshot. Errors (retried with backoff): the API server's, and a
// deletion with policy Delete that the store refused.
func (r *EtcdSnapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s hactlv1.EtcdSnapshot
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var ec hactlv1.EtcdCluster
	ecErr := r.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.ClusterName}, &ec)
	if ecErr != nil && !apierrors.IsNotFound(ecErr) {
		return ctrl.Result{}, ecErr
	}
	if ecErr == nil && ec.Spec.Backup == nil {
		ecErr = fmt.Errorf("EtcdCluster %s has no spec.backup", s.Spec.ClusterName)
	}

	if s.DeletionTimestamp != nil {
		return ctrl.Result{}, r.finalize(ctx, &s, &ec, ecErr)
	}
	if !controllerutil.ContainsFinalizer(&s, hactlv1.SnapshotProtectionFinalizer) {
		controllerutil.AddFinalizer(&s, hactlv1.SnapshotProtectionFinalizer)
		return ctrl.Result{}, r.Client.Update(ctx, &s)
	}
	if ecErr != nil {
		return ctrl.Result{RequeueAfter: time.Minute}, r.writeStatus(ctx, &s, func(st *hactlv1.EtcdSnapshotStatus) {
			if st.Phase == "" {
				st.Phase = SnapshotPending
			}
			setSnapCondition(st, s.Generation, false, ReasonNotInBucket, fmt.Sprintf("EtcdCluster %s: %v", s.Spec.ClusterName, ecErr))
		})
	}
	if s.Spec.Key == "" {
		return r.takeOnDemand(ctx, &s, &ec)
	}
	if s.Status.Phase == SnapshotReady && s.Status.Key == s.Spec.Key {
		return ctrl.Result{}, nil // filled by the sync or an earlier look
	}
	store, err := r.Clusters.openStore(ctx, &ec)
	if err != nil {
		return ctrl.Result{RequeueAfter: time.Minute}, r.writeStatus(ctx, &s, func(st *hactlv1.EtcdSnapshotStatus) {
			setSnapCondition(st, s.Generation, false, observe.ReasonStoreUnavailable, err.Error())
		})
	}
	l, err := backup.List(ctx, store, ec.Spec.Backup.ObjectStore.Prefix, ec.Name)
	if err != nil {
		return ctrl.Result{RequeueAfter: time.Minute}, r.writeStatus(ctx, &s, func(st *hactlv1.EtcdSnapshotStatus) {
			setSnapCondition(st, s.Generation, false, observe.ReasonStoreUnavailable, err.Error())
		})
	}
	return ctrl.Result{}, r.writeStatus(ctx, &s, func(st *hactlv1.EtcdSnapshotStatus) { fillFromListing(st, s.Generation, s.Spec.Key, l) })
}

// takeOnDemand takes the snapshot an EtcdSnapshot without a key asks for, then records its stem in
// spec.key (immutable from then on) and its status.
func (r *EtcdSnapshotReconciler) takeOnDemand(ctx context.Context, s *hactlv1.EtcdSnapshot, ec *hactlv1.EtcdCluster) (ctrl.Result, error) {
	if s.Status.Phase == SnapshotFailed {
		return ctrl.Result{}, nil // one attempt per object: create another to try again
	}
	fail := func(msg string) (ctrl.Result, error) {
		if r.Recorder != nil {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonTakeFailed, "Snapshot", "%s", msg)
		}
		return ctrl.Result{}, r.writeStatus(ctx, s, func(st *hactlv1.EtcdSnapshotStatus) {
			st.Phase = SnapshotFailed
			setSnapCondition(st, s.Generation, false, ReasonTakeFailed, msg)
		})
	}
	cr := r.Clusters
	store, err := cr.openStore(ctx, ec)
	if err != nil {
		return fail(err.Error())
	}
	cfg, err := cr.clientTLS(ctx, ec)
	if err != nil {
		return fail(err.Error())
	}
	var endpoints []string
	for _, m := range ec.Spec.Members {
		endpoints = append(endpoints, m.ClientURL)
	}
	st, err := etcd.StatusWithConfig(ctx, endpoints, cfg, cr.DialTimeout, cr.RequestTimeout)
	if err != nil {
		return fail(fmt.Sprintf("etcd status: %v", err))
	}
	if st.ClusterID != ec.Spec.ClusterID {
		return fail(fmt.Sprintf("the members answer as etcd cluster %s, not spec.clusterID %s of EtcdCluster %s", st.ClusterID, ec.Spec.ClusterID, ec.Name))
	}
	endpoint, member := leaderOf(st)
	if endpoint == "" {
		return fail("no reachable leader")
	}
	cli, err := etcd.NewClientWithConfig(ctx, []string{endpoint}, cfg, cr.DialTimeout)
	if err != nil {
		return fail(err.Error())
	}
	defer cli.Close()
	defer releaseSnapshotMemory()
	b := ec.Spec.Backup
	tctx, cancel := context.WithTimeout(ctx, OnDemandTimeout)
	defer cancel()
	m, err := backup.Take(tctx, cli, endpoint, store, backup.TakeOptions{
		Cluster: ec.Name, Prefix: b.ObjectStore.Prefix, Member: member, Compression: b.Compression,
		Recipients: b.EncryptionRecipients, TakenBy: backup.TakenByOperator, HactlVersion: cr.Version, Now: cr.now,
	})
	if err != nil {
		return fail(fmt.Sprintf("snapshot of member %s: %v", member, err))
	}
	ref := observe.RefFromMetadata(m)
	// The key must land, or the next reconcile would take a second snapshot: retry conflicts on
	// a fresh copy.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur hactlv1.EtcdSnapshot
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
			return err
		}
		cur.Spec.Key = ref.Name
		if err := r.Client.Update(ctx, &cur); err != nil {
			return err
		}
		*s = cur
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("snapshot %s stored, but recording it in the EtcdSnapshot failed: %w", ref.Name, err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonStored, "Snapshot", "member %s at revision %d, %d bytes stored as %s", member, m.Revision, m.StoredSizeBytes, m.Key)
	}
	return ctrl.Result{}, r.writeStatus(ctx, s, func(st *hactlv1.EtcdSnapshotStatus) {
		fillFromMetadata(st, s.Generation, ref.Name, m, nil)
	})
}

// finalize carries out the deletion policy, then removes the finalizer.
func (r *EtcdSnapshotReconciler) finalize(ctx context.Context, s *hactlv1.EtcdSnapshot, ec *hactlv1.EtcdCluster, ecErr error) error {
	if !controllerutil.ContainsFinalizer(s, hactlv1.SnapshotProtectionFinalizer) {
		return nil
	}
	key := s.Spec.Key
	event := func(typ, reason, format string, args ...any) {
		if r.Recorder != nil {
			r.Recorder.Eventf(s, nil, typ, reason, "Delete", format, args...)
		}
	}
	if s.Spec.DeletionPolicy == hactlv1.DeletionDelete && key != "" && ecErr != nil {
		// No EtcdCluster (or no spec.backup) says where the bucket is: nothing can be deleted, and
		// holding the object forever would block its namespace. It goes; the snapshot stays.
		event(corev1.EventTypeWarning, ReasonDeletionBlocked, "snapshot %s left in the bucket: %v (delete it with hactl backup prune or the store's tools)", key, ecErr)
	} else if s.Spec.DeletionPolicy == hactlv1.DeletionDelete && key != "" {
		err := ecErr
		if err == nil {
			var store backup.Store
			if store, err = r.Clusters.openStore(ctx, ec); err == nil {
				var l *backup.Listing
				if l, err = backup.List(ctx, store, ec.Spec.Backup.ObjectStore.Prefix, ec.Name); err == nil {
					err = backup.Delete(ctx, store, l, key)
				}
			}
		}
		switch {
		case errors.Is(err, backup.ErrNewestVerified):
			event(corev1.EventTypeWarning, ReasonNewestVerified, "snapshot %s is the newest verified one: kept in the bucket (deletionPolicy Delete never deletes it)", key)
		case err != nil:
			msg := fmt.Sprintf("deleting snapshot %s from the bucket: %v (retried)", key, err)
			event(corev1.EventTypeWarning, ReasonDeletionBlocked, "%s", msg)
			if werr := r.writeStatus(ctx, s, func(st *hactlv1.EtcdSnapshotStatus) {
				setCondition(&st.Conditions, s.Generation, "DeletionBlocked", true, ReasonDeletionBlocked, msg)
			}); werr != nil {
				log.FromContext(ctx).Error(werr, "status")
			}
			return errors.New(msg)
		default:
			event(corev1.EventTypeNormal, ReasonDeletedInBucket, "snapshot %s deleted from the bucket (deletionPolicy Delete)", key)
		}
	} else if key != "" {
		event(corev1.EventTypeNormal, ReasonRetainedInBucket, "snapshot %s left in the bucket (deletionPolicy Retain)", key)
	}
	controllerutil.RemoveFinalizer(s, hactlv1.SnapshotProtectionFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, s))
}

// writeStatus applies change to s's status through the status subresource when it differs.
func (r *EtcdSnapshotReconciler) writeStatus(ctx context.Context, s *hactlv1.EtcdSnapshot, change func(*hactlv1.EtcdSnapshotStatus)) error {
	return client.IgnoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur hactlv1.EtcdSnapshot
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
			return err
		}
		before := cur.Status.DeepCopy()
		change(&cur.Status)
		if equality.Semantic.DeepEqual(before, &cur.Status) {
			return nil
		}
		if err := r.Client.Status().Update(ctx, &cur); err != nil {
			return err
		}
		*s = cur
		return nil
	}))
}

// fillFromListing sets st from the listing's snapshot key: Ready, or Failed when it is not there.
func fillFromListing(st *hactlv1.EtcdSnapshotStatus, generation int64, key string, l *backup.Listing) {
	sn := l.Find(key)
	if sn == nil {
		st.Phase, st.Key = SnapshotFailed, key
		setSnapCondition(st, generation, false, ReasonNotInBucket, fmt.Sprintf("no complete snapshot %s under %s", key, l.Prefix))
		return
	}
	fillFromMetadata(st, generation, key, sn.Metadata, sn.Verified)
}

func fillFromMetadata(st *hactlv1.EtcdSnapshotStatus, generation int64, key string, m *backup.Metadata, verified *backup.VerifiedMarker) {
	t := metav1.NewTime(m.CompletedAt)
	st.Phase, st.Key, st.Time, st.Revision, st.SizeBytes, st.SHA256 = SnapshotReady, key, &t, m.Revision, m.StoredSizeBytes, m.StoredSHA256
	st.Verified, st.Encrypted = verified != nil, m.Encrypted()
	setSnapCondition(st, generation, true, ReasonStored, fmt.Sprintf("%s stored (%d bytes, sha256 %s)", m.Key, m.StoredSizeBytes, m.StoredSHA256))
}

func setSnapCondition(st *hactlv1.EtcdSnapshotStatus, generation int64, ready bool, reason, msg string) {
	setCondition(&st.Conditions, generation, "Ready", ready, reason, msg)
}

func setCondition(conds *[]metav1.Condition, generation int64, typ string, status bool, reason, msg string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
}

// SnapshotObjectName is the EtcdSnapshot the sync makes for a snapshot: "<cluster>-<stem>" in
// lower case (a stem is "20261203T100000Z-slot" or "…-rev…-member").
func SnapshotObjectName(cluster, stem string) string {
	return cluster + "-" + strings.ToLower(stem)
}

// syncSnapshots makes the EtcdSnapshots of ec match the listing: one per snapshot in the bucket
// (created with the finalizer and its status from the listing), and the objects of snapshots no
// longer there (pruned) deleted; objects asked for on demand and not taken yet are left alone.
func (r *EtcdClusterReconciler) syncSnapshots(ctx context.Context, ec *hactlv1.EtcdCluster, l *backup.Listing) error {
	var list hactlv1.EtcdSnapshotList
	if err := r.Client.List(ctx, &list, client.InNamespace(ec.Namespace)); err != nil {
		return err
	}
	byKey := map[string]*hactlv1.EtcdSnapshot{}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.ClusterName == ec.Name && s.Spec.Key != "" {
			byKey[s.Spec.Key] = s
		}
	}
	inBucket := map[string]bool{}
	for i := range l.Snapshots {
		sn := &l.Snapshots[i]
		inBucket[sn.Stem] = true
		if byKey[sn.Stem] != nil {
			continue
		}
		obj := &hactlv1.EtcdSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: SnapshotObjectName(ec.Name, sn.Stem), Namespace: ec.Namespace,
				Labels: map[string]string{LabelCluster: ec.Name}, Finalizers: []string{hactlv1.SnapshotProtectionFinalizer}},
			Spec: hactlv1.EtcdSnapshotSpec{ClusterName: ec.Name, Key: sn.Stem, DeletionPolicy: hactlv1.DeletionRetain},
		}
		if err := r.Client.Create(ctx, obj); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // made by an earlier sync under another key, or by the user
			}
			return fmt.Errorf("EtcdSnapshot for %s: %w", sn.Stem, err)
		}
		obj.Status = hactlv1.EtcdSnapshotStatus{}
		fillFromMetadata(&obj.Status, obj.Generation, sn.Stem, sn.Metadata, sn.Verified)
		if err := r.Client.Status().Update(ctx, obj); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("EtcdSnapshot %s status: %w", obj.Name, err)
		}
	}
	if len(l.Problems) > 0 {
		return nil // an unreadable metadata object is no proof that its snapshot is gone
	}
	newest := ""
	if latest := l.Latest(); latest != nil {
		newest = latest.Stem
	}
	for key, s := range byKey {
		// Only keys older than the newest listed one are known gone (retention removes the oldest);
		// a newer one may be a snapshot taken on demand after the listing.
		if inBucket[key] || s.DeletionTimestamp != nil || key >= newest {
			continue
		}
		// Gone from the bucket (retention): the object goes too; nothing is left to protect.
		controllerutil.RemoveFinalizer(s, hactlv1.SnapshotProtectionFinalizer)
		if err := r.Client.Update(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
