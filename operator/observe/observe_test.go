package observe

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

var names = []string{"cp-a", "cp-b", "cp-c"}

func spec() hactlv1.EtcdClusterSpec {
	s := hactlv1.EtcdClusterSpec{ClusterID: "c1a55"}
	for i, n := range names {
		s.Members = append(s.Members, hactlv1.MemberEndpoint{Name: n, ClientURL: fmt.Sprintf("https://10.0.0.%d:2379", 11+i)})
	}
	return s
}

// cluster is a status of the three members with those in down not answering and leader leading.
func cluster(leader string, down ...string) *etcd.ClusterStatus {
	cs := &etcd.ClusterStatus{ClusterID: "c1a55", Alarms: []etcd.Alarm{}}
	healthy := 0
	for i, n := range names {
		url := fmt.Sprintf("https://10.0.0.%d:2379", 11+i)
		id := fmt.Sprintf("%x", 0xa0+i)
		cs.Members = append(cs.Members, etcd.MemberInfo{Name: n, ID: id, ClientURLs: []string{url}})
		ep := etcd.EndpointStatus{Endpoint: url, MemberName: n}
		if !contains(down, n) {
			healthy++
			ep.Reachable, ep.Healthy, ep.MemberID, ep.Version, ep.RaftIndex, ep.DBSizeBytes, ep.DBSizeInUseBytes = true, true, id, "3.6.16", 42, 4<<20, 2<<20
			ep.IsLeader = n == leader
		} else {
			ep.Error = "context deadline exceeded"
		}
		cs.Endpoints = append(cs.Endpoints, ep)
	}
	cs.QuorumReachable = healthy >= 2
	if leader != "" && cs.QuorumReachable {
		cs.LeaderName = leader
		cs.LeaderID = fmt.Sprintf("%x", 0xa0+index(leader))
	}
	return cs
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func index(n string) int {
	for i, x := range names {
		if x == n {
			return i
		}
	}
	return -1
}

func cond(t *testing.T, st *hactlv1.EtcdClusterStatus, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, st.Conditions)
	}
	return *c
}

func TestApply(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                          string
		look                          Look
		phase                         hactlv1.Phase
		available, atRisk, degraded   metav1.ConditionStatus
		reasonAvail, reasonRisk, want string
	}{
		{"all healthy", Look{Status: cluster("cp-b")}, hactlv1.PhaseRunning, "True", "False", "False", ReasonQuorumHealthy, ReasonTolerates, "1 more failure(s) tolerated"},
		{"one down", Look{Status: cluster("cp-b", "cp-c")}, hactlv1.PhaseDegraded, "True", "True", "True", ReasonQuorumHealthy, ReasonOneFailureAway, "cp-c (context deadline exceeded)"},
		{"two down: no quorum", Look{Status: cluster("", "cp-b", "cp-c")}, hactlv1.PhaseDegraded, "False", "True", "True", ReasonNoQuorum, ReasonQuorumLost, "cannot commit"},
		{"unreachable", Look{Status: &etcd.ClusterStatus{Endpoints: []etcd.EndpointStatus{{Endpoint: "https://10.0.0.11:2379", Error: "refused"}}}, Err: fmt.Errorf("%w: refused", etcd.ErrNoEndpointReachable)},
			hactlv1.PhasePending, "False", "True", "True", ReasonUnreachable, ReasonUnreachable, "no etcd endpoint reachable"},
		{"certificate refused", Look{Err: fmt.Errorf("%w: %w", etcd.ErrNoEndpointReachable, &tls.CertificateVerificationError{Err: fmt.Errorf("x509: unknown authority")})},
			hactlv1.PhasePending, "False", "True", "True", ReasonCertificateRejected, ReasonCertificateRejected, "refuse the operator's client certificate"},
		{"no Secret", Look{CredentialsErr: fmt.Errorf(`Secret default/etcd-client: not found`)},
			hactlv1.PhasePending, "False", "True", "True", ReasonSecret, ReasonSecret, "etcd-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st hactlv1.EtcdClusterStatus
			Apply(&st, spec(), 3, tc.look, t0)
			if st.Phase != tc.phase || st.ObservedGeneration != 3 {
				t.Errorf("phase %s generation %d, want %s 3", st.Phase, st.ObservedGeneration, tc.phase)
			}
			a, r, d := cond(t, &st, hactlv1.ConditionAvailable), cond(t, &st, hactlv1.ConditionQuorumAtRisk), cond(t, &st, hactlv1.ConditionDegraded)
			if a.Status != tc.available || r.Status != tc.atRisk || d.Status != tc.degraded || a.Reason != tc.reasonAvail || r.Reason != tc.reasonRisk {
				t.Errorf("available %s/%s, at risk %s/%s, degraded %s/%s", a.Status, a.Reason, r.Status, r.Reason, d.Status, d.Reason)
			}
			all := a.Message + " | " + r.Message + " | " + d.Message
			if !strings.Contains(all, tc.want) {
				t.Errorf("messages lack %q: %s", tc.want, all)
			}
			if len(st.Members) != 3 || st.Members[0].Name != "cp-a" {
				t.Errorf("members %+v", st.Members)
			}
		})
	}
}

func TestApplyMembers(t *testing.T) {
	var st hactlv1.EtcdClusterStatus
	cs := cluster("cp-a", "cp-c")
	cs.Alarms = []etcd.Alarm{{MemberID: "a1", Alarm: "NOSPACE"}}
	Apply(&st, spec(), 1, Look{Status: cs}, time.Now())
	if st.Leader != "cp-a" {
		t.Errorf("leader %q", st.Leader)
	}
	a, b, c := st.Members[0], st.Members[1], st.Members[2]
	if a.Role != "leader" || !a.Healthy || a.ID != "a0" || a.Version != "3.6.16" || a.RaftIndex != 42 || a.DBSizeBytes != 4<<20 || a.DBSizeInUseBytes != 2<<20 {
		t.Errorf("cp-a %+v", a)
	}
	if b.Role != "follower" || len(b.Alarms) != 1 || b.Alarms[0] != "NOSPACE" {
		t.Errorf("cp-b %+v", b)
	}
	if c.Role != "" || c.Healthy || c.Error != "context deadline exceeded" {
		t.Errorf("cp-c %+v", c)
	}
	// An alarm alone degrades.
	st = hactlv1.EtcdClusterStatus{}
	cs = cluster("cp-a")
	cs.Alarms = []etcd.Alarm{{MemberID: "a2", Alarm: "NOSPACE"}}
	Apply(&st, spec(), 1, Look{Status: cs}, time.Now())
	if d := cond(t, &st, hactlv1.ConditionDegraded); d.Status != "True" || d.Reason != ReasonAlarm || !strings.Contains(d.Message, "cp-c: NOSPACE") || st.Phase != hactlv1.PhaseDegraded {
		t.Errorf("alarm: %+v phase %s", d, st.Phase)
	}
	// A member the spec does not name degrades; a learner has no vote.
	st = hactlv1.EtcdClusterStatus{}
	cs = cluster("cp-a")
	cs.Members = append(cs.Members, etcd.MemberInfo{Name: "etcd-d", ID: "d0", ClientURLs: []string{"https://10.0.0.14:2379"}, IsLearner: true})
	Apply(&st, spec(), 1, Look{Status: cs}, time.Now())
	if d := cond(t, &st, hactlv1.ConditionDegraded); d.Reason != ReasonUnknownMember || !strings.Contains(d.Message, "etcd-d") {
		t.Errorf("unknown member: %+v", d)
	}
	if r := cond(t, &st, hactlv1.ConditionQuorumAtRisk); r.Status != "False" || !strings.Contains(r.Message, "3 of 3 voting") {
		t.Errorf("a learner counted as a voter: %+v", r)
	}
}

func TestApplyClusterMismatch(t *testing.T) {
	var st hactlv1.EtcdClusterStatus
	cs := cluster("cp-a")
	cs.ClusterID = "beef"
	Apply(&st, spec(), 1, Look{Status: cs}, time.Now())
	a := cond(t, &st, hactlv1.ConditionAvailable)
	if a.Status != "False" || a.Reason != ReasonClusterMismatch || !strings.Contains(a.Message, "beef") || st.Phase != hactlv1.PhasePending || st.Leader != "" {
		t.Errorf("mismatch: %+v phase %s leader %q", a, st.Phase, st.Leader)
	}
	for _, m := range st.Members {
		if m.Healthy || m.ID != "" {
			t.Errorf("a member of another cluster reported: %+v", m)
		}
	}
}

// TestPhases: Pending until seen, then Running ⇄ Degraded (never Pending again); a condition's
// lastTransitionTime moves only when its status does.
func TestPhases(t *testing.T) {
	var st hactlv1.EtcdClusterStatus
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	unreachable := Look{Err: etcd.ErrNoEndpointReachable}
	steps := []struct {
		look Look
		want hactlv1.Phase
	}{
		{unreachable, hactlv1.PhasePending},
		{Look{Status: cluster("cp-a")}, hactlv1.PhaseRunning},
		{Look{Status: cluster("cp-a")}, hactlv1.PhaseRunning},
		{Look{Status: cluster("cp-a", "cp-b")}, hactlv1.PhaseDegraded},
		{unreachable, hactlv1.PhaseDegraded},
		{Look{Status: cluster("cp-c")}, hactlv1.PhaseRunning},
	}
	var firstAvailable metav1.Time
	for i, s := range steps {
		Apply(&st, spec(), 1, s.look, t0.Add(time.Duration(i)*time.Minute))
		if st.Phase != s.want {
			t.Errorf("step %d: phase %s, want %s", i, st.Phase, s.want)
		}
		if i == 1 {
			firstAvailable = cond(t, &st, hactlv1.ConditionAvailable).LastTransitionTime
		}
		if c := cond(t, &st, hactlv1.ConditionAvailable); i == 2 && !c.LastTransitionTime.Equal(&firstAvailable) {
			t.Errorf("Available's lastTransitionTime moved without a change")
		}
	}
}

func TestOwner(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	mk := func(ns, name, id string, created metav1.Time) hactlv1.EtcdCluster {
		return hactlv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: created}, Spec: hactlv1.EtcdClusterSpec{ClusterID: id}}
	}
	deleting := mk("a", "gone", "c1", t0)
	deleting.DeletionTimestamp = &t0
	items := []hactlv1.EtcdCluster{mk("b", "late", "c1", t1), mk("b", "first", "c1", t0), mk("a", "zz", "c1", t0), deleting, mk("a", "other", "c2", t0)}
	o, ok := Owner(items, "c1")
	if !ok || o.Namespace != "a" || o.Name != "zz" {
		t.Errorf("owner %s/%s %v, want a/zz (oldest, then namespace/name; a deleting one never owns)", o.Namespace, o.Name, ok)
	}
	if _, ok := Owner(items, "c3"); ok {
		t.Error("an owner for an ID nobody watches")
	}
	var st hactlv1.EtcdClusterStatus
	MarkDuplicate(&st, 2, "c1", "a/zz", time.Now())
	if d := cond(t, &st, hactlv1.ConditionDegraded); d.Reason != ReasonDuplicateCluster || !strings.Contains(d.Message, "a/zz") || st.Phase != hactlv1.PhaseDegraded {
		t.Errorf("duplicate: %+v", d)
	}
}
