package observe

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func TestInWindow(t *testing.T) {
	w := func(start string, d time.Duration) *hactlv1.MaintenanceWindow {
		return &hactlv1.MaintenanceWindow{Start: start, Duration: metav1.Duration{Duration: d}}
	}
	at := func(s string) time.Time { x, _ := time.Parse(time.RFC3339, s); return x }
	for _, c := range []struct {
		w     *hactlv1.MaintenanceWindow
		now   string
		in    bool
		start string
	}{
		{nil, "2026-12-03T10:00:00Z", true, "0001-01-01T00:00:00Z"},
		{w("02:30", time.Hour), "2026-12-03T02:45:00Z", true, "2026-12-03T02:30:00Z"},
		{w("02:30", time.Hour), "2026-12-03T03:30:00Z", false, "2026-12-03T02:30:00Z"},
		{w("02:30", time.Hour), "2026-12-03T02:29:00Z", false, "2026-12-02T02:30:00Z"},
		{w("23:00", 2*time.Hour), "2026-12-04T00:30:00Z", true, "2026-12-03T23:00:00Z"},
		{w("23:00", 2*time.Hour), "2026-12-04T01:00:00Z", false, "2026-12-03T23:00:00Z"},
		{w("bad", time.Hour), "2026-12-04T01:00:00Z", false, "0001-01-01T00:00:00Z"},
	} {
		in, start := InWindow(at(c.now), c.w)
		if in != c.in || start.Format(time.RFC3339) != c.start {
			t.Errorf("%+v at %s: in %v start %s, want %v %s", c.w, c.now, in, start.Format(time.RFC3339), c.in, c.start)
		}
	}
}

func TestFragmentedAndNoSpace(t *testing.T) {
	cs := &etcd.ClusterStatus{Endpoints: []etcd.EndpointStatus{
		{MemberName: "cp-a", Healthy: true, FragmentationPercent: 60, DBSizeBytes: 1000},
		{MemberName: "cp-b", Healthy: true, FragmentationPercent: 20},
		{MemberName: "cp-c", Healthy: false, FragmentationPercent: 90},
		{MemberName: "cp-d", Healthy: true, IsLearner: true, FragmentationPercent: 90},
	}, Alarms: []etcd.Alarm{{MemberID: "1", Alarm: "NOSPACE"}}}
	if got := Fragmented(cs, 50); len(got) != 1 || !strings.HasPrefix(got[0], "cp-a (60% of 1000 bytes free)") {
		t.Errorf("Fragmented: %v", got)
	}
	if !HasNoSpace(cs) || HasNoSpace(&etcd.ClusterStatus{}) || HasNoSpace(nil) {
		t.Error("HasNoSpace")
	}
	if DefragThreshold(nil) != 50 || DefragThreshold(&hactlv1.MaintenanceSpec{DefragThresholdPercent: 20}) != 20 {
		t.Error("DefragThreshold")
	}
	if !RecoverNoSpace(&hactlv1.MaintenanceSpec{}) || RecoverNoSpace(&hactlv1.MaintenanceSpec{RecoverNoSpace: ptr.To(false)}) || RecoverNoSpace(nil) {
		t.Error("RecoverNoSpace")
	}
}

func TestApplyMaintenance(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	sp := spec()
	sp.Maintenance = &hactlv1.MaintenanceSpec{}
	st := &hactlv1.EtcdClusterStatus{}
	ApplyMaintenance(st, sp, 1, false, "", "", now)
	if m := meta.FindStatusCondition(st.Conditions, hactlv1.ConditionMaintenance); m == nil || m.Status != metav1.ConditionFalse || m.Reason != ReasonMaintenanceIdle {
		t.Fatalf("first look: %+v", m)
	}
	ApplyMaintenance(st, sp, 1, true, ReasonDefragmenting, "defragmenting cp-a", now)
	if m := meta.FindStatusCondition(st.Conditions, hactlv1.ConditionMaintenance); m.Status != metav1.ConditionTrue || m.Reason != ReasonDefragmenting {
		t.Fatalf("running: %+v", m)
	}
	ApplyMaintenance(st, sp, 1, false, ReasonMaintenanceIdle, "cp-a defragmented", now)
	ApplyMaintenance(st, sp, 1, false, "", "", now) // nothing done: the outcome stays
	if m := meta.FindStatusCondition(st.Conditions, hactlv1.ConditionMaintenance); m.Status != metav1.ConditionFalse || m.Message != "cp-a defragmented" {
		t.Fatalf("after: %+v", m)
	}
	// A True left by a replica that died mid-run is reset by the next look.
	ApplyMaintenance(st, sp, 1, true, ReasonCompacting, "compacting", now)
	ApplyMaintenance(st, sp, 1, false, "", "", now)
	if m := meta.FindStatusCondition(st.Conditions, hactlv1.ConditionMaintenance); m.Status != metav1.ConditionFalse {
		t.Fatalf("stale True kept: %+v", m)
	}
	sp.Maintenance = nil
	ApplyMaintenance(st, sp, 2, false, "", "", now)
	if meta.FindStatusCondition(st.Conditions, hactlv1.ConditionMaintenance) != nil {
		t.Error("Maintenance kept without spec.maintenance")
	}
}
