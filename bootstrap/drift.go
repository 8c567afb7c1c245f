package bootstrap

import (
	"context"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// checkOperatorDrift returns a *deploy.DriftError when hactl-operator has healed members that
// cluster.yaml (c) does not show yet (deploy.Drift over the EtcdCluster's status.heals). It asks
// only a cluster that has formed (hactl's state dir has its ID), where the operator is
// (deploy.Where: given, the --kubeconfig/--context, when set, else where operator deploy recorded
// it, else over SSH to a control plane of a spec with Kubernetes, answering SSH's questions with
// prompt), bounded by 20 s; when the API cannot be asked, or the operator is not deployed, there
// is nothing to refuse (nil, the reason on p's debug log): bootstrap is also how a broken control
// plane is repaired.
func checkOperatorDrift(ctx context.Context, c *v1alpha1.Cluster, given *kubeapi.Kubeconfig, prompt provision.Prompter, p *ui.Printer) error {
	if st, err := state.Load(c.Spec.StateDir); err != nil || st == nil || st.ClusterID == "" {
		return nil
	}
	loc := deploy.Where(c, given)
	if loc.Kubeconfig == nil && c.Spec.Kubernetes == nil {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	api, err := loc.Client(actx, c, prompt)
	if err != nil {
		p.Debugf("operator heals: the API could not be asked, not checked: %v", err)
		return nil
	}
	defer api.Close()
	st, err := deploy.ReadStatus(actx, api.Config, loc.Namespace, c.Metadata.Name)
	if err != nil || !st.Deployed {
		p.Debugf("operator heals: not checked (deployed %v): %v", st != nil && st.Deployed, err)
		return nil
	}
	if drift := deploy.Drift(c, st.Heals); len(drift) > 0 {
		return &deploy.DriftError{Drift: drift}
	}
	return nil
}
