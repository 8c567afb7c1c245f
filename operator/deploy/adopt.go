package deploy

import (
	"fmt"

	v1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/state"
)

// Adopt records in st (hactl's state dir, cluster.json) the members hactl-operator's heals made:
// for each heal that succeeded, oldest first, the lost member's record is dropped and the new
// member's added as hactl bootstrap records a member it added (its ID, peer and client URLs, the
// --initial-cluster it was started with, --initial-cluster-state existing), so the next bootstrap
// renders its unit byte-identical and restarts nothing. A heal already recorded (the new member's
// record holds its ID) changes nothing. It returns each change in words. Errors: a heal recorded
// without the new member's ID, URLs or initial cluster (an operator older than this hactl): nothing
// is changed then.
func Adopt(st *state.Cluster, heals []v1.HealRecord) ([]string, error) {
	var todo []v1.HealRecord
	for _, h := range heals {
		if h.Result != v1.HealSucceeded {
			continue
		}
		if rec := st.Members[h.Spare]; rec != nil && rec.ID == h.NewMemberID {
			continue
		}
		if h.NewMemberID == "" || h.PeerURL == "" || h.ClientURL == "" || h.InitialCluster == "" {
			return nil, fmt.Errorf("the heal of %s onto %s (finished %s) records no new member ID, URLs or initial cluster: hactl-operator is older than this hactl; redeploy it, or run hactl bootstrap with %s in the spec's etcd hosts (it recovers a member's record from its host)",
				h.Member, h.Spare, h.FinishedAt.UTC().Format("2006-01-02T15:04:05Z"), h.Spare)
		}
		todo = append(todo, h)
	}
	var out []string
	for _, h := range todo {
		if st.Members == nil {
			st.Members = map[string]*state.Member{}
		}
		if old := st.Members[h.Member]; old != nil {
			delete(st.Members, h.Member)
			out = append(out, fmt.Sprintf("%s (ID %s): record dropped (replaced by hactl-operator at %s)", h.Member, h.MemberID, h.FinishedAt.UTC().Format("2006-01-02T15:04:05Z")))
		}
		st.Members[h.Spare] = &state.Member{ID: h.NewMemberID, InitialCluster: h.InitialCluster, InitialClusterState: "existing", PeerURL: h.PeerURL, ClientURL: h.ClientURL}
		out = append(out, fmt.Sprintf("%s (ID %s, %s): recorded as a member", h.Spare, h.NewMemberID, h.ClientURL))
	}
	return out, nil
}
