package observe

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hactl/hactl/backup"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func TestSlots(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 7, 31, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		every      time.Duration
		slot, next string
	}{
		{time.Minute, "20261203T090700Z", "2026-12-03T09:08:00Z"},
		{5 * time.Minute, "20261203T090500Z", "2026-12-03T09:10:00Z"},
		{time.Hour, "20261203T090000Z", "2026-12-03T10:00:00Z"},
		{24 * time.Hour, "20261203T000000Z", "2026-12-04T00:00:00Z"},
	} {
		if got := DueSlot(now, c.every); got != c.slot {
			t.Errorf("every %s: due slot %s, want %s", c.every, got, c.slot)
		}
		if got := NextSlot(now, c.every).Format(time.RFC3339); got != c.next {
			t.Errorf("every %s: next slot %s, want %s", c.every, got, c.next)
		}
	}
	if Every(nil) != DefaultEvery || Every(&hactlv1.BackupSpec{}) != DefaultEvery {
		t.Error("Every's default is not 5m")
	}
	if p := Policy(&hactlv1.BackupSpec{Retention: &hactlv1.Retention{KeepLast: ptr.To[int32](3), KeepDaily: ptr.To[int32](7)}}); p != (backup.Policy{KeepLast: 3, KeepDaily: 7}) {
		t.Errorf("policy %+v", p)
	}
	if p := Policy(&hactlv1.BackupSpec{}); p != (backup.Policy{}) {
		t.Errorf("no retention: policy %+v, want none", p)
	}
}

func TestFindSlotAndTimers(t *testing.T) {
	at := func(s string) time.Time { x, _ := time.Parse(backup.TimeFormat, s); return x }
	l := &backup.Listing{Snapshots: []backup.Snapshot{
		{Stem: "20261203T100000Z-slot", Time: at("20261203T100000Z"), Slot: "20261203T100000Z", Metadata: &backup.Metadata{TakenBy: backup.TakenByOperator}},
		{Stem: "20261203T100312Z-rev000000000000042-cp-a", Time: at("20261203T100312Z"), Metadata: &backup.Metadata{}},
		{Stem: "20261203T100500Z-slot", Time: at("20261203T100500Z"), Slot: "20261203T100500Z", Metadata: &backup.Metadata{}},
	}}
	if s := FindSlot(l, "20261203T100000Z"); s == nil || s.Stem != "20261203T100000Z-slot" {
		t.Errorf("FindSlot: %+v", s)
	}
	if s := FindSlot(l, "20261203T101000Z"); s != nil {
		t.Errorf("FindSlot of a missing slot: %+v", s)
	}
	// The timers' snapshot is the slotted one without TakenBy; a `backup now` by hand is no timer.
	if got := TimerSnapshots(l, at("20261203T095000Z")); len(got) != 1 || got[0].Stem != "20261203T100500Z-slot" {
		t.Errorf("TimerSnapshots: %+v", got)
	}
	if got := TimerSnapshots(l, at("20261203T100600Z")); len(got) != 0 {
		t.Errorf("TimerSnapshots after the window: %+v", got)
	}
}

func TestApplyBackup(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 7, 0, 0, time.UTC)
	sp := spec()
	sp.Backup = &hactlv1.BackupSpec{Every: &metav1.Duration{Duration: 5 * time.Minute}}
	last := func(age time.Duration) *hactlv1.SnapshotRef {
		return &hactlv1.SnapshotRef{Name: "x-slot", Time: metav1.NewTime(now.Add(-age)), Revision: 9}
	}
	for _, c := range []struct {
		name   string
		last   *hactlv1.SnapshotRef
		look   BackupLook
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"fresh", last(7 * time.Minute), BackupLook{}, metav1.ConditionTrue, ReasonBackupFresh, "within 2 × every (10m0s)"},
		{"at the limit", last(10 * time.Minute), BackupLook{}, metav1.ConditionTrue, ReasonBackupFresh, ""},
		{"stale", last(10*time.Minute + time.Second), BackupLook{}, metav1.ConditionFalse, ReasonBackupStale, "more than 2 × every"},
		{"none", nil, BackupLook{}, metav1.ConditionFalse, ReasonNoSnapshot, "no snapshot yet"},
		{"failed but fresh", last(6 * time.Minute), BackupLook{Reason: ReasonBackupFailed, Problem: "no reachable leader"}, metav1.ConditionTrue, ReasonBackupFresh, "the last attempt failed: no reachable leader"},
		{"failed and stale", last(11 * time.Minute), BackupLook{Reason: ReasonBackupFailed, Problem: "no reachable leader"}, metav1.ConditionFalse, ReasonBackupFailed, "no reachable leader"},
		{"timers", last(time.Minute), BackupLook{Reason: ReasonTimersScheduled, Problem: "timers"}, metav1.ConditionFalse, ReasonTimersScheduled, "timers"},
		{"store", last(time.Minute), BackupLook{Reason: ReasonStoreUnavailable, Problem: "no secret"}, metav1.ConditionFalse, ReasonStoreUnavailable, "no secret"},
	} {
		st := &hactlv1.EtcdClusterStatus{LastSnapshot: c.last}
		ApplyBackup(st, sp, 3, c.look, now)
		b := meta.FindStatusCondition(st.Conditions, hactlv1.ConditionBackupFresh)
		if b == nil || b.Status != c.status || b.Reason != c.reason || !strings.Contains(b.Message, c.msg) || b.ObservedGeneration != 3 {
			t.Errorf("%s: %+v, want %s %s containing %q", c.name, b, c.status, c.reason, c.msg)
		}
	}
	// Without spec.backup the condition goes.
	st := &hactlv1.EtcdClusterStatus{}
	ApplyBackup(st, sp, 1, BackupLook{}, now)
	sp.Backup = nil
	ApplyBackup(st, sp, 2, BackupLook{}, now)
	if meta.FindStatusCondition(st.Conditions, hactlv1.ConditionBackupFresh) != nil {
		t.Error("BackupFresh kept without spec.backup")
	}
}
