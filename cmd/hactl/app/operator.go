package app

import (
	"github.com/spf13/cobra"
)

func newOperatorCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Deploy or remove hactl-operator, which watches the etcd cluster from inside Kubernetes",
		Long: `hactl-operator keeps an EtcdCluster (hactl.io/v1alpha1) true to the etcd cluster hactl built:
members, leader, conditions (Available, QuorumAtRisk, Degraded), events on every transition. Its
replicas elect a leader through a Lease; only the leader acts.

The cluster is reached over SSH (the admin kubeconfig of the first control plane that answers, as
hactl kubeconfig does) or through --kubeconfig.`,
		Example: `  make operator-image
  hactl operator deploy -f cluster.yaml --image-archive bin/hactl-operator-image.tar
  hactl operator deploy -f cluster.yaml --kubeconfig kind.conf --image ghcr.io/hactl/hactl-operator:v0.1.0
  hactl operator adopt -f cluster.yaml             # after a heal: hactl's state dir records the new member
  hactl operator remove -f cluster.yaml --yes`,
	}
	cmd.AddCommand(newOperatorDeployCommand(s, g), newOperatorRemoveCommand(s, g), newOperatorAdoptCommand(s, g))
	return cmd
}
