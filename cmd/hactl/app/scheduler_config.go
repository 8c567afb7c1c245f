package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubesched"
	"github.com/hactl/hactl/ui"
)

func newSchedulerConfigCommand(s Streams, g *globalOptions) *cobra.Command {
	var inCluster bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the KubeSchedulerConfiguration (v1) of spec.scheduler",
		Long: `Prints the KubeSchedulerConfiguration hactl deploys: profile spec.scheduler.schedulerName with
ZonePreference (spec.scheduler.preferredZones), MaintenanceGuard and RecordingBinder, NodeResourcesFit
scoring by spec.scheduler.binPacking (NodeResourcesBalancedAllocation disabled, no default
PodTopologySpread constraints), and Lease leader election with spec.scheduler.leaderElection. hactl
checks spec.scheduler itself (exit 2 with the field path); the scheduler's own check of the file is
'hactl-scheduler validate --config FILE', which 'hactl scheduler deploy' runs on the hosts before it
swaps a configuration in.

  hactl scheduler config -f cluster.yaml > config.yaml && bin/hactl-scheduler validate --config config.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := ui.New(s.Err, g.verbose, false)
			c, err := loadSpec(g.file, p, false)
			if err != nil {
				return err
			}
			if c.Spec.Scheduler == nil {
				return &UsageError{Err: fmt.Errorf("%s: spec.scheduler: the spec has no scheduler section: add one (hactl init shows it)", g.file)}
			}
			kc := kubesched.KubeconfigFile
			if inCluster {
				kc = ""
			}
			out, err := kubesched.ConfigYAML(c.Spec.Scheduler, kc)
			if err != nil {
				return err
			}
			_, err = s.Out.Write(out)
			return err
		},
	}
	cmd.Flags().BoolVar(&inCluster, "in-cluster", false, "render for a pod (no kubeconfig file: the in-cluster configuration)")
	return cmd
}
