package maintenance

import (
	"strings"
	"testing"

	"github.com/hactl/hactl/etcd"
)

// TestPlanDefrag: followers by name then the leader; a learner skipped; a spec endpoint that is no
// member left out; an unhealthy or unreachable voter stops the plan.
func TestPlanDefrag(t *testing.T) {
	st := &etcd.ClusterStatus{
		Members: []etcd.MemberInfo{
			{Name: "c", ID: "3", ClientURLs: []string{"https://c:2379"}},
			{Name: "a", ID: "1", ClientURLs: []string{"https://a:2379"}},
			{Name: "b", ID: "2", ClientURLs: []string{"https://b:2379"}},
			{Name: "d", ID: "4", ClientURLs: []string{"https://d:2379"}, IsLearner: true},
		},
		Endpoints: []etcd.EndpointStatus{
			{Endpoint: "https://a:2379", MemberID: "1", MemberName: "a", Reachable: true, Healthy: true, IsLeader: true, FragmentationPercent: 40},
			{Endpoint: "https://b:2379", MemberID: "2", MemberName: "b", Reachable: true, Healthy: true, FragmentationPercent: 5},
			{Endpoint: "https://c:2379", MemberID: "3", MemberName: "c", Reachable: true, Healthy: true, FragmentationPercent: 60},
			{Endpoint: "https://d:2379", MemberID: "4", MemberName: "d", Reachable: true, FragmentationPercent: 60},
			{Endpoint: "https://e:2379"}, // removed from the cluster, still in the spec
		},
	}
	plan, err := planDefrag(st, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range plan {
		s := m.Name
		if m.Skipped != "" {
			s += "(skip)"
		}
		got = append(got, s)
	}
	if strings.Join(got, " ") != "b(skip) c d(skip) a" {
		t.Fatalf("plan %v, want b(skip) c d(skip) a", got)
	}
	st.Endpoints[2].Healthy = false
	if _, err := planDefrag(st, 0); err == nil || !strings.Contains(err.Error(), "c (https://c:2379) (unhealthy)") {
		t.Fatalf("unhealthy voter: %v", err)
	}
	st.Endpoints[2] = etcd.EndpointStatus{Endpoint: "https://c:2379"}
	if _, err := planDefrag(st, 0); err == nil || !strings.Contains(err.Error(), "c (https://c:2379) (unreachable)") {
		t.Fatalf("unreachable voter: %v", err)
	}
}
