package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/memstore"
	"github.com/hactl/hactl/backup/s3test"
	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
	"github.com/hactl/hactl/specload"
)

// clock is a settable clock for the reconciler.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// TestScheduledSnapshots runs the reconciler with spec.backup against a real kube-apiserver
// (envtest), a real 3-member etcd and a real MinIO, on a clock the test moves slot by slot: each
// slot gets exactly one snapshot, named after the slot, taken from the leader and marked as the
// operator's; retention (keepLast 2) runs after each; a status that lost its record of the slot
// (another replica took over) finds the slot's snapshot in the bucket instead of taking it again;
// the members' timers' snapshots stop the operator's schedule with BackupFresh false; a missing
// credentials key is a condition naming the key.
func TestScheduledSnapshots(t *testing.T) {
	f := newFixture(t)
	c, ec, ctx := f.c, f.etcd, context.Background()
	s3 := s3test.Start(t)
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: "default"}, Data: map[string][]byte{
		SecretAccessKeyID: []byte(s3test.AccessKey), SecretSecretAccessKey: []byte(s3test.SecretKey)}}))
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-nokey", Namespace: "default"}, Data: map[string][]byte{
		SecretAccessKeyID: []byte(s3test.AccessKey)}}))

	const prefix = "backups"
	obj := f.cluster("lab", f.id, "etcd-client")
	obj.Spec.Backup = &hactlv1.BackupSpec{
		ObjectStore:       hactlv1.ObjectStore{Endpoint: s3.Endpoint, Bucket: s3test.Bucket, Prefix: prefix, PlainHTTP: true},
		CredentialsSecret: hactlv1.SecretRef{Name: "s3"},
		Every:             &metav1.Duration{Duration: 5 * time.Minute},
		Compression:       "zstd",
		Retention:         &hactlv1.Retention{KeepLast: ptr.To[int32](2)},
	}
	must(t, c.Create(ctx, obj))

	// The slots start at the next 5-minute boundary after now, 2 minutes into it.
	base := time.Now().UTC().Truncate(5 * time.Minute).Add(5*time.Minute + 2*time.Minute)
	clk := &clock{t: base}
	var r *EtcdClusterReconciler
	f.start(t, func(mgr ctrl.Manager) error {
		r = &EtcdClusterReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hactl-operator"),
			RequeuePeriod: 500 * time.Millisecond, DialTimeout: time.Second, RequestTimeout: 2 * time.Second, Now: clk.Now, Version: "test"}
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
		return (&EtcdSnapshotReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hactl-operator"), Clusters: r}).SetupWithManager(mgr)
	})

	store, err := backup.NewS3(backup.S3Config{Endpoint: s3.Endpoint, Bucket: s3test.Bucket, Region: s3test.Region, PlainHTTP: true,
		Credentials: specload.BackupCredentials{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	list := func() *backup.Listing {
		t.Helper()
		l, err := backup.List(ctx, store, prefix, "lab")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	slotOf := func(t time.Time) string { return t.UTC().Truncate(5 * time.Minute).Format(backup.TimeFormat) }

	leaderName := func() string {
		st, err := etcd.Status(ctx, ec.Endpoints(), ec.Files())
		if err != nil {
			t.Fatal(err)
		}
		return st.LeaderName
	}
	for i := 0; i < 3; i++ {
		now := base.Add(time.Duration(i) * 5 * time.Minute)
		clk.Set(now)
		slot := slotOf(now)
		got := waitFor(t, c, "lab", "holding the snapshot of slot "+slot, func(s hactlv1.EtcdClusterStatus) bool {
			return s.LastSnapshot != nil && s.LastSnapshot.Slot == slot && meta.IsStatusConditionTrue(s.Conditions, hactlv1.ConditionBackupFresh)
		})
		if got.LastSnapshot.TakenBy != backup.TakenByOperator || got.LastSnapshot.Name != slot+"-slot" || got.LastSnapshot.Revision == 0 {
			t.Errorf("slot %s: lastSnapshot %+v", slot, got.LastSnapshot)
		}
		s := observe.FindSlot(list(), slot)
		if s == nil {
			t.Fatalf("slot %s: no snapshot in the bucket", slot)
		}
		if s.Metadata.TakenBy != backup.TakenByOperator || s.Metadata.MemberName != leaderName() || s.Metadata.Compression != "zstd" || s.Metadata.HactlVersion != "test" {
			t.Errorf("slot %s: metadata %+v (leader %s)", slot, s.Metadata, leaderName())
		}
	}
	// keepLast 2 after each snapshot: the first slot is gone.
	l := list()
	var slots []string
	for _, s := range l.Snapshots {
		slots = append(slots, s.Slot)
	}
	if want := []string{slotOf(base.Add(5 * time.Minute)), slotOf(base.Add(10 * time.Minute))}; strings.Join(slots, ",") != strings.Join(want, ",") {
		t.Errorf("bucket holds slots %v, want %v (keepLast 2)", slots, want)
	}
	takenBefore := observe.FindSlot(l, slotOf(base.Add(10*time.Minute))).Metadata.CompletedAt

	// A replica taking over with a status that never recorded the slot: the bucket's snapshot of
	// the slot is found and recorded, not taken again.
	var cur hactlv1.EtcdCluster
	must(t, c.Get(ctx, client.ObjectKeyFromObject(obj), &cur))
	cur.Status.LastSnapshot = nil
	must(t, c.Status().Update(ctx, &cur))
	clk.Set(base.Add(10*time.Minute + 2*time.Minute))
	waitFor(t, c, "lab", "the slot recorded again from the bucket", func(s hactlv1.EtcdClusterStatus) bool {
		return s.LastSnapshot != nil && s.LastSnapshot.Slot == slotOf(base.Add(10*time.Minute))
	})
	time.Sleep(2 * time.Second) // a few more reconciles
	if after := observe.FindSlot(list(), slotOf(base.Add(10*time.Minute))).Metadata.CompletedAt; !after.Equal(takenBefore) {
		t.Errorf("the slot's snapshot was taken again after the takeover: completed %s, first %s", after, takenBefore)
	}
	if n := countEvents(t, c, "lab", observe.EventSnapshotTaken); n != 3 {
		t.Errorf("%d SnapshotTaken events, want 3 (one per slot)", n)
	}
	// Each slot's Event is an Event of its own (the Lease drill reads the slot from the note): the
	// recorder would fold Events differing only in their notes into one series.
	var evs eventsv1.EventList
	must(t, c.List(ctx, &evs, client.InNamespace("default")))
	seen := map[string]bool{}
	for _, e := range evs.Items {
		if e.Reason != observe.EventSnapshotTaken {
			continue
		}
		slot, _, _ := strings.Cut(strings.TrimPrefix(e.Note, "slot "), ":")
		if e.Series != nil || e.Related == nil || e.Related.Kind != "EtcdSnapshot" || e.Related.Name != SnapshotObjectName("lab", slot+"-slot") || seen[slot] {
			t.Errorf("SnapshotTaken event %s: note %q, series %+v, related %+v", e.Name, e.Note, e.Series, e.Related)
		}
		seen[slot] = true
	}
	if n := testutil.ToFloat64(metricSnapshots.WithLabelValues("default/lab", "stored")); n != 3 {
		t.Errorf("hactl_operator_snapshots_total{result=stored} %v, want 3", n)
	}
	if v := testutil.ToFloat64(metricCondition.WithLabelValues("default/lab", hactlv1.ConditionBackupFresh, observe.ReasonBackupFresh)); v != 1 {
		t.Errorf("hactl_operator_condition{type=BackupFresh} %v, want 1", v)
	}
	if v := testutil.ToFloat64(metricHealthy.WithLabelValues("default/lab")); v != 3 {
		t.Errorf("hactl_operator_etcd_healthy_members %v, want 3", v)
	}

	// One EtcdSnapshot per snapshot in the bucket: the pruned slot's object is gone.
	snapObjects := func(want int) map[string]hactlv1.EtcdSnapshot {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var sl hactlv1.EtcdSnapshotList
			must(t, c.List(ctx, &sl, client.InNamespace("default"), client.MatchingLabels{LabelCluster: "lab"}))
			out := map[string]hactlv1.EtcdSnapshot{}
			ready := 0
			for _, s := range sl.Items {
				out[s.Spec.Key] = s
				if s.Status.Phase == SnapshotReady && s.DeletionTimestamp == nil {
					ready++
				}
			}
			if ready == want && len(out) == want {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("EtcdSnapshots %+v, want %d Ready", out, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	objs := snapObjects(2)
	for _, sl := range []string{slotOf(base.Add(5 * time.Minute)), slotOf(base.Add(10 * time.Minute))} {
		o, ok := objs[sl+"-slot"]
		if !ok || o.Name != SnapshotObjectName("lab", sl+"-slot") || o.Status.Revision == 0 || o.Status.SHA256 == "" ||
			len(o.Finalizers) != 1 || o.Spec.DeletionPolicy != hactlv1.DeletionRetain {
			t.Errorf("EtcdSnapshot of slot %s: %+v", sl, o)
		}
	}

	// On demand: an EtcdSnapshot without a key is a snapshot taken now.
	must(t, c.Create(ctx, &hactlv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "now", Namespace: "default"},
		Spec: hactlv1.EtcdSnapshotSpec{ClusterName: "lab", DeletionPolicy: hactlv1.DeletionDelete}}))
	var now1 hactlv1.EtcdSnapshot
	deadline := time.Now().Add(30 * time.Second)
	for {
		must(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "now"}, &now1))
		if now1.Status.Phase == SnapshotReady || now1.Status.Phase == SnapshotFailed || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if now1.Status.Phase != SnapshotReady || !strings.Contains(now1.Spec.Key, "-rev") {
		t.Fatalf("on-demand EtcdSnapshot: %+v", now1)
	}
	if list().Find(now1.Spec.Key) == nil {
		t.Fatalf("on-demand snapshot %s not in the bucket", now1.Spec.Key)
	}
	// deletionPolicy Delete: the object's deletion deletes the snapshot from the bucket.
	must(t, c.Delete(ctx, &now1))
	waitGone(t, c, "now")
	if list().Find(now1.Spec.Key) != nil {
		t.Errorf("deletionPolicy Delete left %s in the bucket", now1.Spec.Key)
	}
	// deletionPolicy Retain (the default): the object goes, the snapshot stays.
	retained := objs[slotOf(base.Add(5*time.Minute))+"-slot"]
	must(t, c.Delete(ctx, &retained))
	waitGone(t, c, retained.Name)
	if list().Find(retained.Spec.Key) == nil {
		t.Errorf("deletionPolicy Retain deleted %s from the bucket", retained.Spec.Key)
	}

	// hactl's timers snapshot the next slot too: both schedules at once is refused.
	timerNow := base.Add(15 * time.Minute)
	cli := ec.ClientTo(t, ec.Endpoints()[0])
	if _, err := backup.Take(ctx, cli, ec.Endpoints()[0], store, backup.TakeOptions{Cluster: "lab", Prefix: prefix, Member: ec.Members()[0].Name,
		Slot: slotOf(timerNow), Compression: "none", Now: func() time.Time { return timerNow }}); err != nil {
		t.Fatal(err)
	}
	clk.Set(timerNow.Add(time.Minute))
	got := waitFor(t, c, "lab", "BackupFresh false for the timers' snapshots", func(s hactlv1.EtcdClusterStatus) bool {
		b := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionBackupFresh)
		return b != nil && b.Status == metav1.ConditionFalse && b.Reason == observe.ReasonTimersScheduled
	})
	if b := meta.FindStatusCondition(got.Conditions, hactlv1.ConditionBackupFresh); !strings.Contains(b.Message, "hactl backup schedule --disable") {
		t.Errorf("BackupFresh message does not say how to resolve it: %s", b.Message)
	}

	// Credentials without the secret key: a condition naming the key, nothing taken.
	must(t, c.Get(ctx, client.ObjectKeyFromObject(obj), &cur))
	cur.Spec.Backup.CredentialsSecret.Name = "s3-nokey"
	must(t, c.Update(ctx, &cur))
	waitFor(t, c, "lab", "BackupFresh false for the missing key", func(s hactlv1.EtcdClusterStatus) bool {
		b := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionBackupFresh)
		return b != nil && b.Status == metav1.ConditionFalse && b.Reason == observe.ReasonStoreUnavailable && strings.Contains(b.Message, SecretSecretAccessKey)
	})
}

func countEvents(t *testing.T, c client.Client, name, reason string) int {
	t.Helper()
	var evs eventsv1.EventList
	must(t, c.List(context.Background(), &evs, client.InNamespace("default")))
	n := 0
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

// waitGone waits until the EtcdSnapshot name is gone (its finalizer done).
func waitGone(t *testing.T, c client.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s hactlv1.EtcdSnapshot
		err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &s)
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("EtcdSnapshot %s still there after 30s (err %v): %+v", name, err, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestPruneRemovesDeltas: the operator's retention (prune after a stored snapshot) removes the
// deltas that end at or before every snapshot it keeps, not only the snapshots: before, it planned
// without the deltas and delta chains under an operator-managed schedule grew without bound. The
// deltas that carry a kept snapshot forward stay, and the listing it returns holds only the kept
// snapshots (oldest first). An in-memory store: no envtest, no MinIO.
func TestPruneRemovesDeltas(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	const prefix, cluster = "backups", "lab"
	t0 := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	for i, rev := range []int64{10, 50, 90} {
		if _, err := memstore.PutSnapshot(ctx, store, prefix, cluster, t0.Add(time.Duration(i)*time.Hour), rev); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range [][2]int64{{10, 30}, {30, 50}, {50, 70}, {70, 95}} {
		if _, err := backup.PutDelta(ctx, store, d[0], d[1], nil, 0, backup.PutDeltaOptions{Prefix: prefix, Cluster: cluster}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := backup.List(ctx, store, prefix, cluster)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := prune(ctx, store, l, prefix, cluster, backup.Policy{KeepLast: 2}, t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(kept.Snapshots) != 2 || kept.Snapshots[0].Revision != 50 || kept.Snapshots[1].Revision != 90 {
		t.Errorf("the listing after prune holds %+v, want revisions 50 and 90", kept.Snapshots)
	}
	ds, err := backup.ListDeltas(ctx, store, prefix, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, d := range ds {
		left = append(left, fmt.Sprintf("(%d,%d]", d.Metadata.FromRevision, d.Metadata.ToRevision))
	}
	if strings.Join(left, " ") != "(50,70] (70,95]" {
		t.Errorf("deltas left after keepLast 2: %v, want (50,70] (70,95] (those ending at or before revision 50, the oldest kept snapshot, removed)", left)
	}
	if objs := store.Keys(backup.DeltasPrefix(prefix, cluster)); len(objs) != 4 {
		t.Errorf("objects under the deltas prefix: %q, want the 2 kept deltas' events and metadata", objs)
	}
}
