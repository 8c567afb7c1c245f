package app

import (
	"github.com/spf13/cobra"
)

func newMaintenanceCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "maintenance",
		Short: "Mark a node for maintenance (hactl-scheduler places no new pod on it) or clear the mark",
		Long: `hactl maintenance start NODE sets the maintenance label on the Node (spec.scheduler.maintenanceLabel,
default hactl.io/maintenance; any value marks it) with the annotations hactl.io/maintenance-since and
-reason. hactl-scheduler's MaintenanceGuard then places no new pod there, and the pods' unschedulable
reason names the node; pods already there stay (drain them separately). A pod that tolerates a
NoSchedule taint of the label's key is let through (as DaemonSets tolerate unschedulable nodes).
Over SSH the node must be a Kubernetes node of the spec (checked before any host is contacted); with
--kubeconfig the API must have it. Both exit 2 otherwise.

  hactl maintenance start w-b -f cluster.yaml --reason "kernel upgrade"
  hactl maintenance end w-b -f cluster.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var reason string
	var kf kubeFlags // start and end share their flags' variables
	cmd.AddCommand(newMaintenanceMarkCommand(s, g, true, &reason, &kf), newMaintenanceMarkCommand(s, g, false, &reason, &kf))
	return cmd
}
