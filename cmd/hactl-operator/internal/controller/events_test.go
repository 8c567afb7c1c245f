package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
)

// A condition whose reason changes while its status stays is an event too: Healing stays False
// from NoMemberLost to QuorumLost, and that decision (with the restore command) must be seen.
func TestEventsOnReasonChange(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &EtcdClusterReconciler{Recorder: rec}
	ec := &hactlv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: "hactl-system"}}
	cond := func(reason, msg string) hactlv1.EtcdClusterStatus {
		return hactlv1.EtcdClusterStatus{Phase: hactlv1.PhaseDegraded, Conditions: []metav1.Condition{{Type: hactlv1.ConditionHealing, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}}
	}
	before := cond(observe.ReasonAllMembersServe, "all 3 members healthy")
	after := cond(observe.ReasonHealQuorumLost, "the quorum is lost … hactl restore -f cluster.yaml --from latest")
	r.events(ec, &before, &after)
	same := after
	r.events(ec, &after, &same)
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 1 || !strings.Contains(got[0], "QuorumLost Healing=False: the quorum is lost … hactl restore") {
		t.Errorf("events %q, want one QuorumLost event with the restore command (and none for an unchanged condition)", got)
	}
}
