package controller

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/maintenance"
	"github.com/hactl/hactl/etcd/membership"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
	"github.com/hactl/hactl/ui"
)

// maintenanceStep runs what spec.maintenance makes due, through the etcd/maintenance package (the
// order `hactl etcd` uses): a raised NOSPACE alarm is recovered at any time (compact, defragment
// every member, disarm; a CORRUPT alarm is refused); inside the window the history is compacted
// once per window (compactRetainRevisions > 0) and the members whose free share passed the
// threshold are defragmented, one at a time, followers first and the leader last, each healthy
// again before the next. Before it acts the Maintenance condition is written True with what it
// does; afterwards False with the outcome. It does nothing without a leader, and nothing but NOSPACE
// recovery while any member is unhealthy (Defrag refuses then anyway).
func (r *EtcdClusterReconciler) maintenanceStep(ctx context.Context, ec *hactlv1.EtcdCluster, look observe.Look, now time.Time) error {
	m := ec.Spec.Maintenance
	if m == nil || look.Status == nil || look.Status.LeaderName == "" || look.Status.ClusterID != ec.Spec.ClusterID {
		return nil // nothing is done to a cluster without a leader, or to another cluster
	}
	cs := look.Status
	nospace := observe.HasNoSpace(cs) && observe.RecoverNoSpace(m)
	inWindow, windowStart := observe.InWindow(now, m.Window)
	// Compaction and defragmentation wait for every member to be healthy (Defrag refuses otherwise).
	healthy := len(cs.Endpoints) == len(ec.Spec.Members)
	for _, ep := range cs.Endpoints {
		healthy = healthy && ep.Healthy
	}
	inWindow = inWindow && healthy
	compact := inWindow && m.CompactRetainRevisions > 0 &&
		(ec.Status.LastCompaction == nil || ec.Status.LastCompaction.Time.Before(windowStart) || m.Window == nil && now.Sub(ec.Status.LastCompaction.Time) >= 24*time.Hour)
	fragmented := observe.Fragmented(cs, observe.DefragThreshold(m))
	defrag := inWindow && len(fragmented) > 0
	if !nospace && !compact && !defrag {
		return nil
	}
	key := ec.Namespace + "/" + ec.Name
	if until, ok := r.maintenanceBackoff(key); ok && now.Before(until) {
		return nil // the last attempt failed: wait before compacting and defragmenting again
	}
	cfg, err := r.clientTLS(ctx, ec)
	if err != nil {
		return nil // the look's condition says so already
	}
	cluster := membership.Cluster{Options: []etcd.Option{etcd.WithTLSConfig(cfg)}}
	for _, mm := range ec.Spec.Members {
		cluster.Endpoints = append(cluster.Endpoints, mm.ClientURL)
	}
	p := ui.New(logWriter{ctx}, false, false)

	var reason, doing string
	switch {
	case nospace:
		reason, doing = observe.ReasonRecoveringNoSpace, "NOSPACE alarm raised: compacting, defragmenting every member, disarming (etcd's recovery)"
	case compact:
		reason, doing = observe.ReasonCompacting, fmt.Sprintf("compacting the history to the newest %d revisions", m.CompactRetainRevisions)
	default:
		reason, doing = observe.ReasonDefragmenting, "defragmenting (followers first, the leader last): "+strings.Join(fragmented, ", ")
	}
	if err := r.writeStatus(ctx, ec, func(st *hactlv1.EtcdClusterStatus) {
		observe.ApplyMaintenance(st, ec.Spec, ec.Generation, true, reason, doing, now)
	}); err != nil {
		return err
	}

	var outcome []string
	var failed error
	done := metav1.NewTime(r.now())
	var compacted, defragged bool
	if nospace {
		res, err := maintenance.Disarm(ctx, maintenance.DisarmOptions{Cluster: cluster, Retain: m.CompactRetainRevisions, Printer: p})
		switch {
		case err != nil:
			failed = fmt.Errorf("NOSPACE recovery: %w", err)
		default:
			outcome = append(outcome, fmt.Sprintf("NOSPACE recovered: %d alarm(s) disarmed, %d still raised", len(res.Disarmed), len(res.Remaining)))
			compacted, defragged = res.Compact != nil, res.Defrag != nil
		}
	}
	if failed == nil && compact && !compacted {
		res, err := maintenance.Compact(ctx, cluster, m.CompactRetainRevisions)
		switch {
		case err != nil:
			failed = fmt.Errorf("compaction: %w", err)
		case res.Skipped != "":
			outcome, compacted = append(outcome, "compaction skipped: "+res.Skipped), true
		default:
			outcome, compacted = append(outcome, fmt.Sprintf("compacted to revision %d (of %d)", res.CompactedTo, res.Revision)), true
		}
	}
	if failed == nil && defrag && !defragged {
		res, err := maintenance.Defrag(ctx, maintenance.DefragOptions{Cluster: cluster, MinFragmentation: observe.DefragThreshold(m), Printer: p})
		if err != nil {
			failed = fmt.Errorf("defragmentation: %w", err)
		} else {
			defragged = true
			for _, md := range res.Members {
				if md.Skipped == "" {
					outcome = append(outcome, fmt.Sprintf("%s defragmented %d → %d bytes in %.0f ms", md.Name, md.BeforeBytes, md.AfterBytes, md.DurationMs))
				}
			}
		}
	}
	typ, evReason, msg := corev1.EventTypeNormal, reason, strings.Join(outcome, "; ")
	condReason := observe.ReasonMaintenanceIdle
	if failed != nil {
		typ, evReason, condReason = corev1.EventTypeWarning, observe.ReasonMaintenanceFailed, observe.ReasonMaintenanceFailed
		msg = strings.TrimPrefix(msg+"; ", "; ") + failed.Error()
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, typ, evReason, "Maintenance", "%s", msg)
	}
	if failed != nil {
		r.setMaintenanceBackoff(key, r.now().Add(MaintenanceRetry))
	} else {
		r.setMaintenanceBackoff(key, time.Time{})
	}
	msg = fmt.Sprintf("%s at %s", msg, done.UTC().Format(time.RFC3339))
	log.FromContext(ctx).Info("maintenance", "reason", evReason, "outcome", msg)
	return r.writeStatus(ctx, ec, func(st *hactlv1.EtcdClusterStatus) {
		observe.ApplyMaintenance(st, ec.Spec, ec.Generation, false, condReason, msg, r.now())
		if compacted {
			st.LastCompaction = &done
		}
		if defragged {
			st.LastDefragmentation = &done
		}
	})
}

// MaintenanceRetry is how long after a failed maintenance (a NOSPACE that compaction and
// defragmentation did not cure, a member refusing the defragmentation) the operator waits before it
// tries again: each attempt blocks every member in turn.
const MaintenanceRetry = 10 * time.Minute

func (r *EtcdClusterReconciler) maintenanceBackoff(key string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.backoff[key]
	return t, ok
}

func (r *EtcdClusterReconciler) setMaintenanceBackoff(key string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.backoff == nil {
		r.backoff = map[string]time.Time{}
	}
	if until.IsZero() {
		delete(r.backoff, key)
		return
	}
	r.backoff[key] = until
}

// logWriter sends a ui.Printer's lines to the reconcile's logger.
type logWriter struct{ ctx context.Context }

func (w logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		log.FromContext(w.ctx).Info(line)
	}
	return len(b), nil
}

var _ io.Writer = logWriter{}
