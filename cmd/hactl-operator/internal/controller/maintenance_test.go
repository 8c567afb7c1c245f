package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
)

// TestMaintenance runs the reconciler with spec.maintenance against envtest and a real 3-member
// etcd: a database fragmented past the threshold is defragmented (every member smaller, the
// Maintenance condition False with the outcome, an event, lastDefragmentation set); compaction runs
// once (compactRetainRevisions); a NOSPACE alarm raised through etcd's API is recovered (disarmed)
// by the operator; a window that is not now holds defragmentation back.
func TestMaintenance(t *testing.T) {
	f := newFixture(t)
	c, ec, ctx := f.c, f.etcd, context.Background()

	// Fragment the database: 400 values of 10 KiB written, deleted, compacted.
	cli := ec.Client(t)
	v := strings.Repeat("x", 10<<10)
	for i := range 400 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/frag/%05d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Delete(ctx, "/frag/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	before := map[string]int64{}
	deadline := time.Now().Add(30 * time.Second)
	for { // bbolt frees the compacted pages over the next commits
		if _, err := cli.Put(ctx, "/tick", time.Now().String()); err != nil {
			t.Fatal(err)
		}
		s, err := etcd.Status(ctx, ec.Endpoints(), ec.Files())
		if err != nil {
			t.Fatal(err)
		}
		min := 100.0
		for _, ep := range s.Endpoints {
			before[ep.MemberName] = ep.DBSizeBytes
			min = minf(min, ep.FragmentationPercent)
		}
		if min >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database did not fragment: %+v", s.Endpoints)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A window that is not now: nothing is defragmented.
	now := time.Now().UTC()
	closed := &hactlv1.MaintenanceWindow{Start: now.Add(2 * time.Hour).Format("15:04"), Duration: metav1.Duration{Duration: time.Hour}}
	obj := f.cluster("lab", f.id, "etcd-client")
	obj.Spec.Maintenance = &hactlv1.MaintenanceSpec{DefragThresholdPercent: 25, Window: closed, CompactRetainRevisions: 10}
	must(t, c.Create(ctx, obj))
	f.start(t, func(mgr ctrl.Manager) error {
		return (&EtcdClusterReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hactl-operator"),
			RequeuePeriod: 500 * time.Millisecond, DialTimeout: time.Second, RequestTimeout: 2 * time.Second}).SetupWithManager(mgr)
	})
	waitFor(t, c, "lab", "Running, maintenance idle", func(s hactlv1.EtcdClusterStatus) bool {
		m := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionMaintenance)
		return s.Phase == hactlv1.PhaseRunning && m != nil && m.Status == metav1.ConditionFalse && m.Reason == observe.ReasonMaintenanceIdle
	})
	time.Sleep(2 * time.Second)
	var cur hactlv1.EtcdCluster
	must(t, c.Get(ctx, client.ObjectKeyFromObject(obj), &cur))
	if cur.Status.LastDefragmentation != nil || cur.Status.LastCompaction != nil {
		t.Fatalf("maintenance ran outside its window: %+v", cur.Status)
	}

	// The window opened (no window: any time): compaction once, then defragmentation.
	cur.Spec.Maintenance.Window = nil
	must(t, c.Update(ctx, &cur))
	got := waitFor(t, c, "lab", "defragmented", func(s hactlv1.EtcdClusterStatus) bool {
		m := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionMaintenance)
		return s.LastDefragmentation != nil && s.LastCompaction != nil && m != nil && m.Status == metav1.ConditionFalse && strings.Contains(m.Message, "defragmented")
	})
	after, err := etcd.Status(ctx, ec.Endpoints(), ec.Files())
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range after.Endpoints {
		if ep.DBSizeBytes >= before[ep.MemberName] {
			t.Errorf("%s: DB %d bytes after the defragmentation, %d before", ep.MemberName, ep.DBSizeBytes, before[ep.MemberName])
		}
	}
	if m := meta.FindStatusCondition(got.Conditions, hactlv1.ConditionMaintenance); !strings.HasPrefix(strings.Split(m.Message, "; ")[len(strings.Split(m.Message, "; "))-1], got.Leader+" defragmented") {
		t.Errorf("the leader %s was not defragmented last: %s", got.Leader, m.Message)
	}
	if n := countEvents(t, c, "lab", observe.ReasonDefragmenting) + countEvents(t, c, "lab", observe.ReasonCompacting); n < 1 {
		t.Errorf("no maintenance event")
	}
	compacted := got.LastCompaction.Time
	time.Sleep(2 * time.Second)
	must(t, c.Get(ctx, client.ObjectKeyFromObject(obj), &cur))
	if !cur.Status.LastCompaction.Time.Equal(compacted) {
		t.Errorf("compacted again within the day: %s, then %s", compacted, cur.Status.LastCompaction.Time)
	}

	// NOSPACE raised: recovered (compact, defrag, disarm) by the operator.
	var id uint64
	fmt.Sscanf(mustStatus(t, ec).Endpoints[0].MemberID, "%x", &id)
	if _, err := etcdserverpb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "lab", "NOSPACE recovered", func(s hactlv1.EtcdClusterStatus) bool {
		m := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionMaintenance)
		return m != nil && m.Status == metav1.ConditionFalse && strings.Contains(m.Message, "NOSPACE recovered")
	})
	as, err := cli.AlarmList(ctx)
	if err != nil || len(as.Alarms) != 0 {
		t.Errorf("alarms after the recovery: %+v %v", as, err)
	}
	if _, err := cli.Put(ctx, "/after-nospace", "ok"); err != nil {
		t.Errorf("a put after the recovery: %v", err)
	}
}

func minf(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}
