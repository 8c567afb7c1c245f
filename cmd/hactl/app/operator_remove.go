package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/operator/deploy"
)

func newOperatorRemoveCommand(s Streams, g *globalOptions) *cobra.Command {
	var yes, purge bool
	f := &operatorFlags{}
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Delete the operator's Deployment, EtcdCluster, Secrets and RBAC; CRDs, EtcdSnapshots and the bucket stay unless --purge",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, c, closeLog, err := operatorTarget(s, g, f, false)
			if err != nil {
				return err
			}
			defer closeLog()
			ns := nsOrDefault(f.namespace)
			fmt.Fprintf(s.Err, "Plan: delete in %s the Deployment, Lease and PodDisruptionBudget %s, the EtcdCluster %s, the Secrets %s, %s, %s, %s and %s*, the Role, RoleBinding and ServiceAccount %s. ",
				ns, deploy.Name, c.Metadata.Name, deploy.ClientSecret, deploy.S3Secret, deploy.S3CASecret, deploy.SSHKeySecret, deploy.SpareSecretPrefix, deploy.Name)
			if purge {
				fmt.Fprintf(s.Err, "--purge: then every EtcdSnapshot of %s, each by its deletionPolicy (Delete: its snapshot is deleted from the bucket, never the newest verified one; Retain: the bucket is not touched), and the CRDs unless other EtcdClusters or EtcdSnapshots use them; the EtcdSnapshots left in %s lose their finalizer %s, which only the operator carries out (deleting one, or the namespace, then finishes); etcd is not touched.\n", c.Metadata.Name, ns, deploy.SnapshotFinalizer)
			} else {
				fmt.Fprintf(s.Err, "The CRDs, every EtcdSnapshot and the snapshots in the bucket stay (--purge removes the EtcdSnapshots and CRDs); the EtcdSnapshots lose their finalizer %s, which only the operator carries out (deleting one, or the namespace, then finishes and leaves the bucket untouched; a redeployed operator puts it back); etcd is not touched.\n", deploy.SnapshotFinalizer)
			}
			if err := confirmOrStop(s, yes, "", "Remove hactl-operator?"); err != nil {
				return err
			}
			api, err := apiClient(cmd, s, c, f.kubeFlags)
			if err != nil {
				return err
			}
			defer api.Close()
			removed, err := deploy.Uninstall(cmd.Context(), api.Config, c, ns, purge)
			for _, r := range removed {
				if r.Note != "" {
					p.Infof("  %s %s: %s", r.Kind, r.Name, r.Note)
				} else if r.Gone {
					p.Infof("  %s %s: already gone", r.Kind, r.Name)
				} else {
					p.Infof("  %s %s: deleted", r.Kind, r.Name)
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete every EtcdSnapshot of the cluster by its own deletionPolicy (only Delete touches the bucket) and the CRDs when nothing else uses them")
	f.add(cmd)
	return cmd
}
