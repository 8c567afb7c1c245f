package app

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubesched"
	"github.com/hactl/hactl/ui"
)

// newMaintenanceMarkCommand is `hactl maintenance start NODE` (on) or `end NODE`; both bind their
// flags to reason and kf.
func newMaintenanceMarkCommand(s Streams, g *globalOptions, on bool, reason *string, kf *kubeFlags) *cobra.Command {
	use, short := "end NODE", "Clear the maintenance mark of NODE"
	if on {
		use, short = "start NODE", "Mark NODE for maintenance: label spec.scheduler.maintenanceLabel (default hactl.io/maintenance) =true, annotations since and reason"
	}
	c := &cobra.Command{
		Use: use, Short: short,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := ui.New(s.Err, g.verbose, false)
			if err := kf.check(); err != nil {
				return err
			}
			var cluster *v1alpha1.Cluster
			if _, err := os.Stat(g.file); kf.kubeconfig != "" && (err == nil || cmd.Flags().Changed("file")) {
				// The spec names the label (spec.scheduler.maintenanceLabel); the API names the nodes.
				if cluster, err = loadSpec(g.file, p, false); err != nil {
					return err
				}
			}
			if kf.kubeconfig == "" {
				var closeLog func()
				var err error
				if p, cluster, _, closeLog, err = hostRun(s, g); err != nil {
					return err
				}
				defer closeLog()
				if err := kubesched.CheckSpecNode(cluster, args[0]); err != nil {
					return err
				}
			}
			api, err := apiClient(cmd, s, cluster, *kf)
			if err != nil {
				return err
			}
			defer api.Close()
			if err := kubesched.SetMaintenance(cmd.Context(), api, kubesched.MaintenanceLabel(cluster), args[0], on, *reason, time.Now()); err != nil {
				return api.Wrap(err)
			}
			state := "under maintenance: hactl-scheduler places no new pod on it (pods on it stay; drain them separately)"
			if !on {
				state = "out of maintenance"
			}
			p.Infof("%s is %s", args[0], state)
			return nil
		},
	}
	kf.addKube(c.Flags(), "reach the cluster through this kubeconfig instead of over SSH")
	if on {
		c.Flags().StringVar(reason, "reason", "", "why (shown in the pods' unschedulable reason)")
	}
	return c
}
