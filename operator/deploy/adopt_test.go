package deploy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/state"
)

func TestAdopt(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC))
	st := &state.Cluster{Name: "lab", Token: "t", Members: map[string]*state.Member{
		"cp-a": {ID: "a1"}, "cp-b": {ID: "b2"}, "cp-c": {ID: "c3", InitialCluster: "x", InitialClusterState: "new"},
	}}
	heal := hactlv1.HealRecord{Member: "cp-c", MemberID: "c3", Spare: "spare-c", NewMemberID: "d4", Result: hactlv1.HealSucceeded, FinishedAt: at,
		PeerURL: "https://10.0.0.16:2380", ClientURL: "https://10.0.0.16:2379", InitialCluster: "cp-a=https://10.0.0.11:2380,cp-b=https://10.0.0.12:2380,spare-c=https://10.0.0.16:2380"}
	failed := hactlv1.HealRecord{Member: "cp-b", Spare: "spare-x", Result: hactlv1.HealFailed}
	changes, err := Adopt(st, []hactlv1.HealRecord{failed, heal})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || !strings.Contains(changes[0], "cp-c (ID c3): record dropped") || !strings.Contains(changes[1], "spare-c (ID d4") {
		t.Errorf("changes %v", changes)
	}
	if st.Members["cp-c"] != nil || st.Members["cp-b"] == nil {
		t.Errorf("members %v", st.Members)
	}
	if m := st.Members["spare-c"]; m == nil || m.ID != "d4" || m.InitialClusterState != "existing" || m.InitialCluster != heal.InitialCluster || m.PeerURL != heal.PeerURL {
		t.Errorf("spare-c's record %+v", m)
	}
	// Again: nothing to do.
	if changes, err := Adopt(st, []hactlv1.HealRecord{heal}); err != nil || len(changes) != 0 {
		t.Errorf("a second adopt: %v %v", changes, err)
	}
	// A record without what the state needs: refused, nothing changed.
	old := hactlv1.HealRecord{Member: "cp-a", Spare: "spare-a", NewMemberID: "e5", Result: hactlv1.HealSucceeded}
	if _, err := Adopt(st, []hactlv1.HealRecord{old}); err == nil || !strings.Contains(err.Error(), "older than this hactl") || st.Members["cp-a"] == nil {
		t.Errorf("an old record: %v, members %v", err, st.Members)
	}
}
