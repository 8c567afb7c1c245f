package deploy

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeapi"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// Adoption is what AdoptHeals did, or would do on a dry run.
type Adoption struct {
	// Changes are the state dir's changes in words (Adopt); Drift what cluster.yaml must still
	// change (Drift).
	Changes, Drift []string
	// Heals is how many heals the EtcdCluster's status records.
	Heals int
}

// AdoptHeals is `hactl operator adopt`: the EtcdCluster of c in namespace read through api
// (ReadStatus), its heals recorded in c's state dir (Adopt), saved atomically unless dryRun (the
// file named on p), and the spec's drift from them (Drift). Errors: the API's (api.Wrap), a state
// dir without cluster.json (*exitcode.UsageError, exit 2), Adopt's, the state dir's.
func AdoptHeals(ctx context.Context, api *kubeapi.Client, namespace string, c *v1alpha1.Cluster, dryRun bool, p *ui.Printer) (*Adoption, error) {
	st, err := ReadStatus(ctx, api.Config, namespace, c.Metadata.Name)
	if err != nil {
		return nil, api.Wrap(err)
	}
	cur, err := state.Load(c.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, &exitcode.UsageError{Err: fmt.Errorf("spec.stateDir %s holds no cluster.json: nothing to adopt into (hactl bootstrap recovers a lost state dir from the hosts)", c.Spec.StateDir)}
	}
	changes, err := Adopt(cur, st.Heals)
	if err != nil {
		return nil, err
	}
	a := &Adoption{Changes: changes, Drift: Drift(c, st.Heals), Heals: len(st.Heals)}
	if len(changes) > 0 && !dryRun {
		if err := state.Save(c.Spec.StateDir, cur); err != nil {
			return nil, err
		}
		p.Infof("operator/adopt: %s updated", filepath.Join(c.Spec.StateDir, state.FileName))
	}
	return a, nil
}

// Adopt records in st (hactl's state dir, cluster.json) the members hactl-operator's heals made:
// for each heal that succeeded, oldest first, the lost member's record is dropped and the new
// member's added as hactl bootstrap records a member it added (its ID, peer and client URLs, the
// --initial-cluster it was started with, --initial-cluster-state existing), so the next bootstrap
// renders its unit byte-identical and restarts nothing. A heal already recorded (the new member's
// record holds its ID) changes nothing. It returns each change in words. Errors: a heal recorded
// without the new member's ID, URLs or initial cluster (an operator older than this hactl): nothing
// is changed then.
func Adopt(st *state.Cluster, heals []hactlv1.HealRecord) ([]string, error) {
	var todo []hactlv1.HealRecord
	for _, h := range heals {
		if h.Result != hactlv1.HealSucceeded {
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
