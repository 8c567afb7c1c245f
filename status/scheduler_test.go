package status

import (
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubesched"
)

func TestSchedulerProblems(t *testing.T) {
	s := v1alpha1.DefaultScheduler(&v1alpha1.Scheduler{})
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	healthy := kubesched.Status{Lease: kubesched.LeaseStatus{Namespace: "kube-system", Name: "hactl-scheduler", Holder: "cp-a_x", RenewTime: now.Add(-3 * time.Second)},
		Replicas: []kubesched.Replica{{Pod: "hactl-scheduler-cp-a", Node: "cp-a", Ready: true, Leader: true}, {Pod: "hactl-scheduler-cp-b", Node: "cp-b", Ready: true}}}
	if p := SchedulerProblems(healthy, s, now); len(p) != 0 {
		t.Fatalf("healthy: %v", p)
	}
	if p := SchedulerProblems(kubesched.Status{}, s, now); len(p) != 0 {
		t.Fatalf("not deployed is not a problem: %v", p)
	}
	stale := healthy
	stale.Lease.RenewTime = now.Add(-time.Minute)
	stale.Replicas = append([]kubesched.Replica(nil), healthy.Replicas...)
	stale.Replicas[1].Ready = false
	p := SchedulerProblems(stale, s, now)
	if len(p) != 2 || !strings.Contains(p[0], "stopped renewing") || !strings.Contains(p[1], "hactl-scheduler-cp-b on cp-b not Ready") {
		t.Fatalf("stale holder and a replica not Ready: %v", p)
	}
	none := healthy
	none.Lease.Holder = ""
	if p := SchedulerProblems(none, s, now); len(p) != 1 || !strings.Contains(p[0], "no replica holds") {
		t.Fatalf("no holder: %v", p)
	}
}
