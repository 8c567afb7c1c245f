package observe

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// healSpec is spec() with zones az-a/b/c and spec.healing: autoReplace, grace 5m, spares spare-c
// (az-c), spare-a (az-a) and spare-x (az-a again) in that order.
func healSpec() hactlv1.EtcdClusterSpec {
	s := spec()
	for i := range s.Members {
		s.Members[i].Zone = "az-" + string(rune('a'+i))
	}
	s.Healing = &hactlv1.HealingSpec{AutoReplace: true, GracePeriod: &metav1.Duration{Duration: 5 * time.Minute},
		SSHKeySecret: &hactlv1.SecretRef{Name: "key"},
		Spares: []hactlv1.SpareHost{
			{Name: "spare-a", Address: "10.0.0.21", Zone: "az-a"},
			{Name: "spare-c", Address: "10.0.0.23", Zone: "az-c"},
			{Name: "spare-x", Address: "10.0.0.24", Zone: "az-a"},
		}}
	return s
}

func TestUnhealthySinceAcrossLooks(t *testing.T) {
	s := healSpec()
	st := &hactlv1.EtcdClusterStatus{}
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	Apply(st, s, 1, Look{Status: cluster("cp-a", "cp-c")}, t0)
	if got := st.Members[2].UnhealthySince; got == nil || !got.Time.Equal(t0) {
		t.Fatalf("cp-c unhealthySince %v, want %s", got, t0)
	}
	if st.Members[0].UnhealthySince != nil {
		t.Errorf("healthy cp-a has unhealthySince %v", st.Members[0].UnhealthySince)
	}
	// Later looks keep the first time, also when nothing answers at all.
	Apply(st, s, 1, Look{Status: cluster("cp-a", "cp-c")}, t0.Add(time.Minute))
	Apply(st, s, 1, Look{Err: errTimeout}, t0.Add(2*time.Minute))
	if got := st.Members[2].UnhealthySince; got == nil || !got.Time.Equal(t0) {
		t.Errorf("cp-c unhealthySince %v after two more looks, want %s", got, t0)
	}
	if got := st.Members[0].UnhealthySince; got == nil || !got.Time.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("cp-a unseen: unhealthySince %v, want the look's time", got)
	}
	// Back: cleared; down again: a new start.
	Apply(st, s, 1, Look{Status: cluster("cp-a")}, t0.Add(3*time.Minute))
	if st.Members[2].UnhealthySince != nil {
		t.Errorf("cp-c healthy again, unhealthySince %v", st.Members[2].UnhealthySince)
	}
	Apply(st, s, 1, Look{Status: cluster("cp-a", "cp-c")}, t0.Add(4*time.Minute))
	if got := st.Members[2].UnhealthySince; got == nil || !got.Time.Equal(t0.Add(4*time.Minute)) {
		t.Errorf("cp-c down again: unhealthySince %v", got)
	}
}

var errTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string { return "context deadline exceeded" }

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	look := func(s hactlv1.EtcdClusterSpec, cs *etcd.ClusterStatus, at time.Duration) (*hactlv1.EtcdClusterStatus, HealDecision) {
		st := &hactlv1.EtcdClusterStatus{}
		Apply(st, s, 1, Look{Status: cs}, t0)
		if at > 0 {
			Apply(st, s, 1, Look{Status: cs}, t0.Add(at))
		}
		return st, Decide(s, st, cs, t0.Add(at))
	}
	for _, tc := range []struct {
		name       string
		spec       func() hactlv1.EtcdClusterSpec
		cs         func() *etcd.ClusterStatus
		at         time.Duration
		action     HealAction
		reason     string
		member     string
		spare      string
		msgHas     []string
		untilGrace bool
	}{
		{"no healing", spec, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, time.Hour, HealNothing, "", "", "", nil, false},
		{"all healthy", healSpec, func() *etcd.ClusterStatus { return cluster("cp-a") }, 0, HealNothing, ReasonAllMembersServe, "", "", []string{"all 3 members healthy"}, false},
		{"inside grace", healSpec, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, 4 * time.Minute, HealWait, ReasonGracePeriod, "cp-c", "",
			[]string{"cp-c unhealthy for 4m0s", "2026-12-05T03:05:00Z"}, true},
		{"past grace: the spare in its zone", healSpec, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, 6 * time.Minute, HealStart, ReasonHealing, "cp-c", "spare-c",
			[]string{"replacing it onto spare-c", "zone az-c"}, false},
		{"a lost member's zone without a spare: the first that keeps the spread", func() hactlv1.EtcdClusterSpec {
			s := healSpec()
			s.Healing.Spares = s.Healing.Spares[:1] // spare-a (az-a) only
			return s
		}, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, 6 * time.Minute, HealReport, ReasonNoFreeSpare, "cp-c", "",
			[]string{"spare-a would put a quorum of the 3 members in zone az-a"}, false},
		{"zoneless members: any free spare", func() hactlv1.EtcdClusterSpec {
			s := healSpec()
			for i := range s.Members {
				s.Members[i].Zone = ""
			}
			return s
		}, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, 6 * time.Minute, HealStart, ReasonHealing, "cp-c", "spare-a", nil, false},
		{"autoReplace off: report what would be done", func() hactlv1.EtcdClusterSpec {
			s := healSpec()
			s.Healing.AutoReplace = false
			return s
		}, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, 6 * time.Minute, HealReport, ReasonAutoReplaceOff, "cp-c", "spare-c",
			[]string{"would replace it onto spare-c"}, false},
		{"quorum lost: nothing destructive, the restore command", healSpec, func() *etcd.ClusterStatus { return cluster("", "cp-b", "cp-c") }, time.Hour, HealReport, ReasonHealQuorumLost, "cp-b", "",
			[]string{"quorum is lost", "hactl restore -f cluster.yaml --from latest"}, false},
		{"nothing answers", healSpec, func() *etcd.ClusterStatus { return nil }, time.Hour, HealReport, ReasonClusterNotSeen, "cp-a", "", []string{"does not see etcd cluster c1a55"}, false},
		{"another cluster answers", healSpec, func() *etcd.ClusterStatus {
			cs := cluster("cp-a", "cp-c")
			cs.ClusterID = "beef"
			return cs
		}, time.Hour, HealReport, ReasonClusterNotSeen, "cp-a", "", nil, false},
		{"a learner pending", healSpec, func() *etcd.ClusterStatus {
			cs := cluster("cp-a", "cp-c")
			cs.Members = append(cs.Members, etcd.MemberInfo{ID: "beef", IsLearner: true, PeerURLs: []string{"https://10.0.0.24:2380"}})
			return cs
		}, 6 * time.Minute, HealReport, ReasonLearnerPending, "cp-c", "", []string{"learner beef"}, false},
		{"every spare in use", func() hactlv1.EtcdClusterSpec {
			s := healSpec()
			s.Healing.Spares = []hactlv1.SpareHost{{Name: "cp-b", Address: "10.0.0.31"}, {Name: "spare-z", Address: "10.0.0.12"}}
			return s
		}, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, 6 * time.Minute, HealReport, ReasonNoFreeSpare, "cp-c", "",
			[]string{"every spare already runs a member (cp-b, spare-z)", "spare pool is empty"}, false},
		{"a member etcd does not list", healSpec, func() *etcd.ClusterStatus {
			cs := cluster("cp-a", "cp-c")
			cs.Members = cs.Members[:2]
			return cs
		}, 6 * time.Minute, HealReport, ReasonNotHealingMember, "cp-c", "", []string{"nothing to replace"}, false},
		{"no spares", func() hactlv1.EtcdClusterSpec {
			s := healSpec()
			s.Healing.Spares = nil
			return s
		}, func() *etcd.ClusterStatus { return cluster("cp-a", "cp-c") }, 6 * time.Minute, HealReport, ReasonNoFreeSpare, "cp-c", "", []string{"spec.healing.spares is empty"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, d := look(tc.spec(), tc.cs(), tc.at)
			if d.Action != tc.action || d.Reason != tc.reason || d.Member != tc.member || d.Spare != tc.spare {
				t.Errorf("decision %+v, want action %s reason %s member %q spare %q", d, tc.action, tc.reason, tc.member, tc.spare)
			}
			for _, w := range tc.msgHas {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q lacks %q", d.Message, w)
				}
			}
			if tc.untilGrace && !d.Until.Equal(t0.Add(5*time.Minute)) {
				t.Errorf("until %s, want the end of the grace period", d.Until)
			}
			if tc.member == "cp-c" && tc.reason != ReasonNotHealingMember && d.MemberID != "a2" {
				t.Errorf("member ID %q, want a2 (from the member list: cp-c did not answer)", d.MemberID)
			}
			SetHealing(st, 1, d, t0)
			c := findCond(st, hactlv1.ConditionHealing)
			switch {
			case tc.reason == "" && c != nil:
				t.Errorf("Healing condition %+v without spec.healing", c)
			case tc.reason != "" && (c == nil || c.Reason != tc.reason || (c.Status == metav1.ConditionTrue) != (tc.action == HealStart)):
				t.Errorf("Healing condition %+v, want reason %s, true only for a start", c, tc.reason)
			}
		})
	}
}

func TestDecideAfterAFailedHeal(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	s, cs := healSpec(), cluster("cp-a", "cp-c")
	st := &hactlv1.EtcdClusterStatus{}
	Apply(st, s, 1, Look{Status: cs}, t0)
	st.Heals = []hactlv1.HealRecord{{Member: "cp-c", Spare: "spare-c", Result: hactlv1.HealFailed, Message: "host key mismatch", FinishedAt: metav1.NewTime(t0.Add(6 * time.Minute))},
		{Member: "cp-b", Result: hactlv1.HealSucceeded, FinishedAt: metav1.NewTime(t0.Add(7 * time.Minute))}}
	Apply(st, s, 1, Look{Status: cs}, t0.Add(8*time.Minute))
	d := Decide(s, st, cs, t0.Add(8*time.Minute))
	if d.Action != HealWait || d.Reason != ReasonHealFailed || !d.Until.Equal(t0.Add(16*time.Minute)) || !strings.Contains(d.Message, "host key mismatch") {
		t.Errorf("8m after a failed heal: %+v", d)
	}
	Apply(st, s, 1, Look{Status: cs}, t0.Add(17*time.Minute))
	if d := Decide(s, st, cs, t0.Add(17*time.Minute)); d.Action != HealStart {
		t.Errorf("after HealRetryAfter: %+v, want a new start", d)
	}
}

func TestDecideContinuesARecordedHeal(t *testing.T) {
	st := &hactlv1.EtcdClusterStatus{Healing: &hactlv1.HealingStatus{Member: "cp-c", MemberID: "a2", Spare: "spare-c", Step: hactlv1.HealAddingLearner}}
	// Whatever the members look like now (all healthy here), a recorded heal is continued.
	d := Decide(healSpec(), st, cluster("cp-a"), time.Now())
	if d.Action != HealContinue || d.Spare != "spare-c" || !strings.Contains(d.Message, "step AddingLearner") {
		t.Errorf("decision %+v, want the recorded heal continued", d)
	}
}

func TestFreeSparesAndVoters(t *testing.T) {
	s := healSpec()
	cs := cluster("cp-a", "cp-c")
	if n := FreeSpares(s, cs); n != 3 {
		t.Errorf("free spares %d, want 3", n)
	}
	cs.Members = append(cs.Members, etcd.MemberInfo{Name: "spare-c", ID: "b1", PeerURLs: []string{"https://10.0.0.23:2380"}})
	s.Members = append(s.Members, hactlv1.MemberEndpoint{Name: "other", ClientURL: "https://10.0.0.24:2379"})
	if n := FreeSpares(s, cs); n != 1 {
		t.Errorf("free spares %d with spare-c a member and spare-x's address in use, want 1", n)
	}
	if n := FreeSpares(spec(), cs); n != 0 {
		t.Errorf("free spares %d without spec.healing", n)
	}
	st := &hactlv1.EtcdClusterStatus{}
	Apply(st, healSpec(), 1, Look{Status: cluster("cp-a", "cp-c")}, time.Now())
	vs := Voters(cluster("cp-a", "cp-c"), st)
	if len(vs) != 3 || !vs[0].Healthy || vs[2].Healthy || vs[2].ID != 0xa2 || vs[2].Name != "cp-c" {
		t.Errorf("voters %+v", vs)
	}
}

func findCond(st *hactlv1.EtcdClusterStatus, typ string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}
