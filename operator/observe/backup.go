package observe

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/schedule"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// Reasons of the BackupFresh condition.
const (
	ReasonBackupFresh      = "SnapshotFresh"
	ReasonBackupStale      = "SnapshotStale"
	ReasonNoSnapshot       = "NoSnapshot"
	ReasonBackupFailed     = "SnapshotFailed"
	ReasonTimersScheduled  = "TimersAlsoSchedule"
	ReasonStoreUnavailable = "ObjectStoreUnavailable"
)

// EventSnapshotTaken is the reason of the Normal Event hactl-operator records for each scheduled
// snapshot it stores, regarding the EtcdCluster; its note begins "slot SLOT:" (the Lease drill counts
// these per slot to prove no slot was taken twice or skipped across a takeover).
const EventSnapshotTaken = "SnapshotTaken"

// DefaultEvery is spec.backup.every's default (the CRD's default too).
const DefaultEvery = 5 * time.Minute

// Every is spec.backup.every, DefaultEvery when unset.
func Every(b *hactlv1.BackupSpec) time.Duration {
	if b == nil || b.Every == nil || b.Every.Duration <= 0 {
		return DefaultEvery
	}
	return b.Every.Duration
}

// Policy is spec.backup.retention as `hactl backup prune`'s policy; the zero Policy (prune
// nothing) when retention is unset.
func Policy(b *hactlv1.BackupSpec) backup.Policy {
	if b == nil || b.Retention == nil {
		return backup.Policy{}
	}
	n := func(p *int32) int {
		if p == nil {
			return 0
		}
		return int(*p)
	}
	r := b.Retention
	return backup.Policy{KeepLast: n(r.KeepLast), KeepHourly: n(r.KeepHourly), KeepDaily: n(r.KeepDaily)}
}

// DueSlot is the slot a snapshot is due for at now: the slot now falls in (schedule.SlotName, the
// rule the members' timers name their snapshots by), so a replica that takes over mid-slot takes
// that slot's snapshot late rather than skipping it, and the slot's object key (backup.Stem's
// "<slot>-slot") is the same whoever takes it, so a slot is never stored twice.
func DueSlot(now time.Time, every time.Duration) string { return schedule.SlotName(now, every) }

// NextSlot is when the slot after the one now falls in starts.
func NextSlot(now time.Time, every time.Duration) time.Time {
	return schedule.Slot(now, every).Add(every)
}

// FindSlot returns the listing's complete snapshot for slot (backup.TimeFormat), nil if none.
func FindSlot(l *backup.Listing, slot string) *backup.Snapshot {
	for i := len(l.Snapshots) - 1; i >= 0; i-- {
		if l.Snapshots[i].Slot == slot {
			return &l.Snapshots[i]
		}
	}
	return nil
}

// TimerSnapshots returns the scheduled snapshots in the listing taken at or after since by
// hactl's own schedule (the members' systemd timers: a slot, and no TakenBy), oldest first. Both
// schedules at once is refused: the operator takes no snapshot while they keep appearing.
func TimerSnapshots(l *backup.Listing, since time.Time) []backup.Snapshot {
	var out []backup.Snapshot
	for _, s := range l.Snapshots {
		if s.Slot != "" && s.Metadata != nil && s.Metadata.TakenBy == "" && !s.Time.Before(since) {
			out = append(out, s)
		}
	}
	return out
}

// Ref is the status' record of a stored snapshot.
func Ref(s *backup.Snapshot) *hactlv1.SnapshotRef {
	r := &hactlv1.SnapshotRef{Name: s.Stem, Time: metav1.NewTime(s.Time), Revision: s.Revision, SizeBytes: s.Data.Size, Slot: s.Slot}
	if s.Metadata != nil {
		r.TakenBy = s.Metadata.TakenBy
		if !s.Metadata.CompletedAt.IsZero() {
			r.Time = metav1.NewTime(s.Metadata.CompletedAt)
		}
	}
	return r
}

// RefFromMetadata is Ref of a snapshot just taken (backup.Take's metadata).
func RefFromMetadata(m *backup.Metadata) *hactlv1.SnapshotRef {
	stem := strings.TrimSuffix(m.MetadataKey[strings.LastIndex(m.MetadataKey, "/")+1:], ".json")
	return &hactlv1.SnapshotRef{Name: stem, Time: metav1.NewTime(m.CompletedAt), Revision: m.Revision, SizeBytes: m.StoredSizeBytes, Slot: m.Slot, TakenBy: m.TakenBy}
}

// BackupLook is what one backup step saw: Problem (a failed snapshot, an unreachable store, the
// timers' snapshots) with its Reason, or neither.
type BackupLook struct {
	Reason, Problem string
}

// ApplyBackup sets BackupFresh from st.LastSnapshot: True while the newest snapshot is younger
// than 2 × every (the rule: one missed slot is tolerated, two are not); False past it, or
// with no snapshot at all once the cluster's first slot has passed; a problem is False with its
// reason even while the snapshot is still fresh enough, except a failed attempt within the grace
// (the next slot retries), which is reported in the message only. With spec.backup unset the
// condition is removed.
func ApplyBackup(st *hactlv1.EtcdClusterStatus, spec hactlv1.EtcdClusterSpec, generation int64, look BackupLook, now time.Time) {
	if spec.Backup == nil {
		removeCondition(st, hactlv1.ConditionBackupFresh)
		return
	}
	every := Every(spec.Backup)
	limit := 2 * every
	last := st.LastSnapshot
	switch {
	case look.Reason == ReasonTimersScheduled || look.Reason == ReasonStoreUnavailable:
		set(st, generation, now, hactlv1.ConditionBackupFresh, false, look.Reason, look.Problem)
	case last == nil:
		msg := fmt.Sprintf("no snapshot yet (every %s)", every)
		if look.Problem != "" {
			msg += ": " + look.Problem
		}
		set(st, generation, now, hactlv1.ConditionBackupFresh, false, cmp.Or(look.Reason, ReasonNoSnapshot), msg)
	case now.Sub(last.Time.Time) > limit:
		msg := fmt.Sprintf("the newest snapshot %s was stored at %s, more than 2 × every (%s) ago", last.Name, last.Time.UTC().Format(time.RFC3339), limit)
		if look.Problem != "" {
			msg += "; " + look.Problem
		}
		set(st, generation, now, hactlv1.ConditionBackupFresh, false, cmp.Or(look.Reason, ReasonBackupStale), msg)
	default:
		msg := fmt.Sprintf("the newest snapshot %s (revision %d) was stored at %s, within 2 × every (%s)", last.Name, last.Revision, last.Time.UTC().Format(time.RFC3339), limit)
		if look.Problem != "" {
			msg += "; the last attempt failed: " + look.Problem
		}
		set(st, generation, now, hactlv1.ConditionBackupFresh, true, ReasonBackupFresh, msg)
	}
}

func removeCondition(st *hactlv1.EtcdClusterStatus, typ string) {
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
