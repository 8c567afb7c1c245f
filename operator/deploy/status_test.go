package deploy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func TestStatusProblems(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if p := (&Status{}).Problems(LeaseDuration, now); p != nil {
		t.Errorf("not deployed: %v", p)
	}
	healthy := &Status{Namespace: "hactl-system", Deployed: true, Replicas: 2, AvailableReplicas: 2, Holder: "pod-1_x", RenewTime: now.Add(-3 * time.Second),
		Conditions: []metav1.Condition{
			{Type: v1.ConditionAvailable, Status: metav1.ConditionTrue}, {Type: v1.ConditionDegraded, Status: metav1.ConditionFalse},
			{Type: v1.ConditionQuorumAtRisk, Status: metav1.ConditionFalse}, {Type: v1.ConditionBackupFresh, Status: metav1.ConditionTrue},
		}}
	if p := healthy.Problems(LeaseDuration, now); p != nil {
		t.Errorf("healthy: %v", p)
	}
	bad := *healthy
	bad.AvailableReplicas, bad.RenewTime = 0, now.Add(-time.Minute)
	bad.Conditions = []metav1.Condition{
		{Type: v1.ConditionQuorumAtRisk, Status: metav1.ConditionTrue, Reason: "OneFailureFromQuorumLoss", Message: "2 of 3"},
		{Type: v1.ConditionBackupFresh, Status: metav1.ConditionFalse, Reason: "SnapshotStale", Message: "old"},
	}
	got := strings.Join(bad.Problems(LeaseDuration, now), "\n")
	for _, want := range []string{"no replica of 2 available", "stopped renewing", "QuorumAtRisk=True (OneFailureFromQuorumLoss): 2 of 3", "BackupFresh=False (SnapshotStale): old"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	bad.Holder = ""
	if got := strings.Join(bad.Problems(LeaseDuration, now), "\n"); !strings.Contains(got, "no replica holds Lease hactl-system/hactl-operator") {
		t.Errorf("no holder: %s", got)
	}
}
