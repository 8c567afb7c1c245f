package deploy

import (
	"context"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/state"
)

// Location is where hactl-operator of a cluster is asked: its namespace, and the kubeconfig to
// reach that API through (nil: over SSH to a control plane of the spec's own cluster).
type Location struct {
	Namespace  string
	Kubeconfig *kubeapi.Kubeconfig
}

// Where locates hactl-operator of c: through given (--kubeconfig/--context) when set, else
// where `hactl operator deploy` recorded it in c's state dir (state.Cluster.Operator), else over
// SSH; the namespace is the recorded one, else DefaultNamespace. A state dir that cannot be read
// counts as no record (the commands that read it report that themselves).
func Where(c *v1alpha1.Cluster, given *kubeapi.Kubeconfig) Location {
	loc := Location{Namespace: DefaultNamespace, Kubeconfig: given}
	st, err := state.Load(c.Spec.StateDir)
	if err != nil || st == nil || st.Operator == nil {
		return loc
	}
	if st.Operator.Namespace != "" {
		loc.Namespace = st.Operator.Namespace
	}
	if loc.Kubeconfig == nil && st.Operator.Kubeconfig != "" {
		loc.Kubeconfig = &kubeapi.Kubeconfig{Path: st.Operator.Kubeconfig, Context: st.Operator.Context}
	}
	return loc
}

// Record writes where the operator of c was deployed into c's state dir (atomic), or drops the
// record (loc nil: operator remove). A cluster without a state record yet is left alone.
// Errors: reading or writing cluster.json.
func Record(c *v1alpha1.Cluster, loc *Location) error {
	st, err := state.Load(c.Spec.StateDir)
	if err != nil || st == nil {
		return err
	}
	if loc == nil {
		if st.Operator == nil {
			return nil
		}
		st.Operator = nil
	} else {
		st.Operator = &state.Operator{Namespace: loc.Namespace}
		if loc.Kubeconfig != nil {
			st.Operator.Kubeconfig, st.Operator.Context = loc.Kubeconfig.Path, loc.Kubeconfig.Context
		}
	}
	return state.Save(c.Spec.StateDir, st)
}

// Client connects to the API of l: through its kubeconfig (kubeapi.FromKubeconfig), else over SSH
// to a control plane of c (kubeapi.FromSpec). Errors: theirs.
func (l Location) Client(ctx context.Context, c *v1alpha1.Cluster, prompt provision.Prompter) (*kubeapi.Client, error) {
	if l.Kubeconfig != nil {
		return kubeapi.FromKubeconfig(ctx, *l.Kubeconfig)
	}
	return kubeapi.FromSpec(ctx, c, prompt)
}
