package observe

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// Reasons of the Maintenance condition.
const (
	ReasonDefragmenting     = "Defragmenting"
	ReasonCompacting        = "Compacting"
	ReasonRecoveringNoSpace = "RecoveringNoSpace"
	ReasonMaintenanceIdle   = "Idle"
	ReasonMaintenanceFailed = "MaintenanceFailed"
)

// DefaultDefragThreshold is spec.maintenance.defragThresholdPercent's default (the CRD's too).
const DefaultDefragThreshold = 50

// DefragThreshold is spec.maintenance.defragThresholdPercent, its default when unset.
func DefragThreshold(m *hactlv1.MaintenanceSpec) float64 {
	if m == nil || m.DefragThresholdPercent == 0 {
		return DefaultDefragThreshold
	}
	return float64(m.DefragThresholdPercent)
}

// RecoverNoSpace is spec.maintenance.recoverNoSpace (default true).
func RecoverNoSpace(m *hactlv1.MaintenanceSpec) bool {
	return m != nil && (m.RecoverNoSpace == nil || *m.RecoverNoSpace)
}

// InWindow reports whether now falls in the daily UTC window w (nil: always) and when the window
// now falls in started (zero for nil). A window may cross midnight (start 23:00, 2h).
func InWindow(now time.Time, w *hactlv1.MaintenanceWindow) (bool, time.Time) {
	if w == nil {
		return true, time.Time{}
	}
	hh, mm, ok := strings.Cut(w.Start, ":")
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if !ok || err1 != nil || err2 != nil {
		return false, time.Time{}
	}
	now = now.UTC()
	start := time.Date(now.Year(), now.Month(), now.Day(), h, m, 0, 0, time.UTC)
	if start.After(now) {
		start = start.AddDate(0, 0, -1)
	}
	return now.Before(start.Add(w.Duration.Duration)), start
}

// Fragmented returns the healthy voters whose database has at least threshold percent free
// (etcd.Fragmentation), by name.
func Fragmented(cs *etcd.ClusterStatus, threshold float64) []string {
	if cs == nil {
		return nil
	}
	var out []string
	for _, ep := range cs.Endpoints {
		if ep.Healthy && !ep.IsLearner && ep.FragmentationPercent >= threshold {
			out = append(out, fmt.Sprintf("%s (%.0f%% of %d bytes free)", ep.MemberName, ep.FragmentationPercent, ep.DBSizeBytes))
		}
	}
	return out
}

// HasNoSpace reports whether a NOSPACE alarm is raised.
func HasNoSpace(cs *etcd.ClusterStatus) bool {
	if cs == nil {
		return false
	}
	for _, a := range cs.Alarms {
		if a.Alarm == "NOSPACE" {
			return true
		}
	}
	return false
}

// ApplyMaintenance sets the Maintenance condition: True with reason while the operator works
// (running), else False with the outcome of the last action (reason Idle, or MaintenanceFailed with
// the error); with no reason (nothing done) the last outcome stays. Removed without
// spec.maintenance.
func ApplyMaintenance(st *hactlv1.EtcdClusterStatus, spec hactlv1.EtcdClusterSpec, generation int64, running bool, reason, msg string, now time.Time) {
	if spec.Maintenance == nil {
		removeCondition(st, hactlv1.ConditionMaintenance)
		return
	}
	if reason == "" { // nothing done now: the last outcome stays
		for _, c := range st.Conditions {
			if c.Type == hactlv1.ConditionMaintenance && c.Status == "False" {
				return
			}
		}
		reason, msg = ReasonMaintenanceIdle, "no maintenance done yet"
	}
	set(st, generation, now, hactlv1.ConditionMaintenance, running, reason, msg)
}
