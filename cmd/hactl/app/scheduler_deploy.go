package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubeadm/images"
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
			p, c, sch, closeLog, err := schedulerTarget(cmd, s, g, f, !o.DryRun)
			if err != nil {
				return err
			}
			defer closeLog()
			if f.kubeconfig == "" {
				o.Cluster, o.Out, o.Printer, o.Prompt = c, s.Out, p, terminalPrompter(s.In, s.Err)
				return kubesched.Deploy(cmd.Context(), o)
			}
			// The nodes must have the image already (kind load image-archive): an archive only names it.
			image, archive, flag := o.Image, o.ImageArchive, "--image-archive"
			if image == "" && archive == "" {
				image, archive, flag = sch.Image, sch.ImageArchive, "spec.scheduler.imageArchive"
			}
			if image == "" && archive != "" {
				refs, err := images.ArchiveImages(archive)
				if err != nil || len(refs) != 1 {
					return &UsageError{Err: fmt.Errorf("%s %s: want an archive of one image (%v, %v)", flag, archive, refs, err)}
				}
				image = refs[0]
			}
			var platforms []images.Platform
			if archive != "" {
				var err error
				if platforms, err = images.ArchivePlatforms(archive); err != nil {
					return &UsageError{Err: fmt.Errorf("%s %s: %w", flag, archive, err)}
				}
			}
			kind, err := checkKindFlags(kindCluster, f.kubeconfig, archive)
			if err != nil {
				return err
			}
			field := "spec.scheduler"
			if c == nil {
				field = "--"
			}
			opts := kubesched.APIDeployOptions{Scheduler: sch, Field: field, Image: image, Platforms: platforms, DryRun: o.DryRun, Wait: o.Wait, Out: s.Out, Printer: p}
			if o.DryRun {
				return kubesched.DeployThroughAPI(cmd.Context(), nil, opts)
			}
			api, err := f.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer api.Close()
			if kindCluster != "" {
				if err := images.KindLoad(cmd.Context(), api, kind, kindCluster, archive, platforms, p); err != nil {
					return err
				}
			}
			err = kubesched.DeployThroughAPI(cmd.Context(), api, opts)
			var ue *kubesched.UsageError
			if c == nil && errors.As(err, &ue) {
				return &UsageError{Err: errors.New(flagPaths(ue.Msg))}
			}
			return api.Wrap(err)
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
