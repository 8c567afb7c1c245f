package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubesched"
)

func newSchedulerDeployCommand(s Streams, g *globalOptions) *cobra.Command {
	o := kubesched.DeployOptions{}
	var kindCluster string
	f := &schedulerFlags{}
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Run hactl-scheduler HA: static pods on the control planes (over SSH) or a Deployment (--kubeconfig)",
		Long: fmt.Sprintf(`Over SSH (-f cluster.yaml): a static pod %s on every control-plane host: the
image (imported into containerd from --image-archive or spec.scheduler.imageArchive when a host
lacks it, else pulled), %s with a kubeconfig for the user %s made on the host
(kubeadm kubeconfig user: the CA key stays there), the configuration (checked by
'hactl-scheduler validate' in that image before it replaces the running one), and the RBAC a second
scheduler needs (kube-scheduler's ClusterRoles, its own Lease, the authentication reader).

Through a kubeconfig (--kubeconfig): a ServiceAccount with that RBAC, the configuration in a
ConfigMap, a Deployment (replicas one per node by required anti-affinity, spread across zones,
system-cluster-critical, the control planes' taint tolerated, probes on the secure port) and a
PodDisruptionBudget; the nodes must have the image (kind load image-archive; --image-archive only
reads the reference and the platform from the archive, and nodes of another architecture are refused).
--kind-cluster NAME loads the archive into that kind cluster first, once its nodes are the
kubeconfig's and each can run the image.

Either way it then waits until every replica runs the configuration and one holds the Lease. A
re-run with the same settings changes nothing.

  hactl scheduler deploy -f cluster.yaml --image-archive bin/hactl-scheduler-image.tar
  hactl scheduler deploy -f cluster.yaml --dry-run      # the files and the RBAC, no host contacted
  hactl scheduler deploy --kubeconfig kind.conf --image-archive bin/hactl-scheduler-image.tar --kind-cluster kind --preferred-zone az-a=100`,
			kubesched.ManifestFile, kubesched.Dir, kubesched.User),
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Wait <= 0 { // kubesched reads 0 as 2 minutes
				return &UsageError{Err: fmt.Errorf("--wait %s: must be a positive duration, e.g. 3m", o.Wait)}
			}
			p, c, sch, closeLog, err := schedulerTarget(cmd, s, g, f, !o.DryRun)
			if err != nil {
				return err
			}
			defer closeLog()
			if f.kubeconfig == "" {
				o.Cluster, o.Out, o.Printer, o.Prompt = c, s.Out, p, terminalPrompter(s.In, s.Err)
				return kubesched.Deploy(cmd.Context(), o)
			}
			field := "spec.scheduler"
			var paths func(string) string
			if c == nil {
				field, paths = "--", flagPaths
			}
			return kubesched.DeployThroughKubeconfig(cmd.Context(), kubesched.KubeconfigDeployOptions{
				APIDeployOptions: kubesched.APIDeployOptions{Scheduler: sch, Field: field, Image: o.Image, DryRun: o.DryRun, Wait: o.Wait, Out: s.Out, Printer: p},
				ImageArchive:     o.ImageArchive, KindCluster: kindCluster, Kubeconfig: f.kubeconfig, Connect: f.connect, FlagPaths: paths,
			})
		},
	}
	cmd.Flags().StringVar(&o.ImageArchive, "image-archive", "", "a docker save / OCI archive of the image (make scheduler-image writes bin/hactl-scheduler-image.tar)")
	cmd.Flags().StringVar(&kindCluster, "kind-cluster", "", kindClusterUsage)
	cmd.Flags().StringVar(&o.Image, "image", "", "the image reference (default spec.scheduler.image, or the one the archive holds)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print what it would write and apply; contact nothing")
	cmd.Flags().DurationVar(&o.Wait, "wait", 3*time.Minute, "how long to wait for every replica and a Lease holder")
	f.add(cmd, true)
	return cmd
}
