package app

import (
	"github.com/spf13/cobra"
)

func newSchedulerCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "hactl-scheduler: render its configuration, deploy it HA (static pods or a Deployment), show its Lease",
		Long: `hactl-scheduler is kube-scheduler with hactl's plugins (ZonePreference, MaintenanceGuard,
RecordingBinder), for pods that set schedulerName: hactl-scheduler (spec.scheduler.schedulerName).
Its replicas elect a leader on their own Lease (kube-system/hactl-scheduler by default).

Two ways to run it: static pods on the control planes hactl built (over SSH, -f cluster.yaml), or
a Deployment in any cluster (--kubeconfig; e.g. kind in CI, with spec.scheduler from -f when the
file exists, else the defaults and the flags).

  hactl scheduler config -f cluster.yaml          # the KubeSchedulerConfiguration spec.scheduler gives
  make scheduler-image                            # bin/hactl-scheduler-image.tar, FROM scratch
  hactl scheduler deploy -f cluster.yaml --image-archive bin/hactl-scheduler-image.tar
  hactl scheduler status -f cluster.yaml          # replicas, Lease holder, renew time, transitions
  kind load image-archive bin/hactl-scheduler-image.tar
  hactl scheduler deploy --kubeconfig kind.conf --image-archive bin/hactl-scheduler-image.tar --replicas 1`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSchedulerConfigCommand(s, g), newSchedulerDeployCommand(s, g), newSchedulerStatusCommand(s, g), newSchedulerRemoveCommand(s, g))
	return cmd
}
