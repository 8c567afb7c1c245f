package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/ui"
)

type operatorFlags struct {
	kubeFlags
	namespace string
}

func (f *operatorFlags) add(cmd *cobra.Command) {
	f.addKube(cmd.Flags(), "reach the cluster through this kubeconfig instead of over SSH")
	cmd.Flags().StringVar(&f.namespace, "namespace", deploy.DefaultNamespace, "the operator's namespace (its RBAC is a Role there; the EtcdCluster lives there)")
}

// operatorTarget loads the spec: with its local files and SSH environment when hosts are contacted
// over SSH (no --kubeconfig, not a dry run), else the spec alone. A kubeconfig that does not load is
// refused first (exit 2).
func operatorTarget(s Streams, g *globalOptions, f *operatorFlags, specOnly bool) (*ui.Printer, *v1alpha1.Cluster, func(), error) {
	if err := f.check(); err != nil {
		return nil, nil, nil, err
	}
	if specOnly || f.kubeconfig != "" {
		p := ui.New(s.Err, g.verbose, false)
		c, err := loadSpec(g.file, p, false)
		if err != nil {
			return nil, nil, nil, err
		}
		return p, c, func() {}, nil
	}
	p, c, _, closeLog, err := hostRun(s, g)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.Spec.Kubernetes == nil {
		closeLog()
		return nil, nil, nil, &UsageError{Err: fmt.Errorf("%s: spec.kubernetes: over SSH hactl reaches the Kubernetes cluster it built; for another cluster pass --kubeconfig FILE", g.file)}
	}
	return p, c, closeLog, nil
}

func nsOrDefault(ns string) string {
	if ns == "" {
		return deploy.DefaultNamespace
	}
	return ns
}

// locatedOperator is the API and namespace of hactl-operator for adopt: --kubeconfig/--context and
// --namespace when given, else where operator deploy recorded it (deploy.Where), else over SSH.
func locatedOperator(cmd *cobra.Command, s Streams, c *v1alpha1.Cluster, f *operatorFlags) (*kubeapi.Client, string, error) {
	loc := deploy.Where(c, f.given())
	if cmd.Flags().Changed("namespace") {
		loc.Namespace = f.namespace
	}
	api, err := loc.Client(cmd.Context(), c, terminalPrompter(s.In, s.Err))
	return api, loc.Namespace, kubeErr(err)
}
