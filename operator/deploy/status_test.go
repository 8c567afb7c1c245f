package deploy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func TestStatusProblems(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if p := (&Status{}).Problems(LeaseDuration, now); p != nil {
		t.Errorf("not deployed: %v", p)
	}
	healthy := &Status{Namespace: "hactl-system", Deployed: true, Replicas: 2, AvailableReplicas: 2, Holder: "pod-1_x", RenewTime: now.Add(-3 * time.Second),
		Conditions: []metav1.Condition{
			{Type: hactlv1.ConditionAvailable, Status: metav1.ConditionTrue}, {Type: hactlv1.ConditionDegraded, Status: metav1.ConditionFalse},
			{Type: hactlv1.ConditionQuorumAtRisk, Status: metav1.ConditionFalse}, {Type: hactlv1.ConditionBackupFresh, Status: metav1.ConditionTrue},
		}}
	if p := healthy.Problems(LeaseDuration, now); p != nil {
		t.Errorf("healthy: %v", p)
	}
	bad := *healthy
	bad.AvailableReplicas, bad.RenewTime = 0, now.Add(-time.Minute)
	bad.Conditions = []metav1.Condition{
		{Type: hactlv1.ConditionQuorumAtRisk, Status: metav1.ConditionTrue, Reason: "OneFailureFromQuorumLoss", Message: "2 of 3"},
		{Type: hactlv1.ConditionBackupFresh, Status: metav1.ConditionFalse, Reason: "SnapshotStale", Message: "old"},
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

func TestDrift(t *testing.T) {
	c := testCluster(t, false) // etcd hosts cp-a, cp-b, cp-c
	at := metav1.NewTime(time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC))
	healed := hactlv1.HealRecord{Member: "cp-c", Spare: "spare-c", Result: hactlv1.HealSucceeded, FinishedAt: at}
	if d := Drift(c, nil); len(d) != 0 {
		t.Errorf("no heals: %v", d)
	}
	if d := Drift(c, []hactlv1.HealRecord{{Member: "cp-c", Spare: "spare-c", Result: hactlv1.HealFailed}}); len(d) != 0 {
		t.Errorf("a failed heal: %v", d)
	}
	d := Drift(c, []hactlv1.HealRecord{healed})
	if len(d) != 1 || !strings.Contains(d[0], "cp-c was replaced by spare-c at 2026-12-05T03:00:00Z") || !strings.Contains(d[0], "hactl operator adopt") {
		t.Errorf("a heal the spec does not show: %v", d)
	}
	// The spec edited as told: nothing to say.
	c.Spec.Hosts[2].Name = "spare-c"
	if d := Drift(c, []hactlv1.HealRecord{healed}); len(d) != 0 {
		t.Errorf("the spec shows the heal: %v", d)
	}
	// spare-c replaced again by spare-d: only the newest heal speaks.
	again := hactlv1.HealRecord{Member: "spare-c", Spare: "spare-d", Result: hactlv1.HealSucceeded, FinishedAt: at}
	if d := Drift(c, []hactlv1.HealRecord{healed, again}); len(d) != 1 || !strings.Contains(d[0], "spare-c was replaced by spare-d") {
		t.Errorf("two heals in a row: %v", d)
	}
}

func TestDriftErrorSaysWhatToChange(t *testing.T) {
	err := error(&DriftError{Drift: []string{"cp-c was replaced by spare-a at T (hactl-operator's heal): move spare-a ..."}})
	for _, want := range []string{"hactl changes nothing until it does", "cp-c was replaced by spare-a"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
