package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/reset"
)

type resetOptions struct {
	hosts  []string
	yes    bool
	dryRun bool
	force  bool
}

func newResetCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &resetOptions{}
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Take Kubernetes nodes out of the cluster (their etcd member removed first) and remove what hactl installed",
		Long: `Resets the named hosts: workers, and control planes whose etcd role is on other hosts. Per host,
in order: the Node is drained and deleted (kubectl on a control plane that stays), /etc/kubernetes
is saved to /var/lib/hactl/backup, 'kubeadm reset' runs, kubelet is stopped and disabled, and
hactl's files are removed (kubelet unit and kubeadm drop-in, kubelet/kubeadm/kubectl, the CNI
network and pod routes, kernel settings, hactl's marker, on a control plane hactl-scheduler's static
pod configuration and kubeconfig), and so are kube-proxy's and kubelet's
iptables chains (KUBE-*; every other rule stays); containerd's configuration from before hactl is
put back when hactl kept one. Packages and imported images stay.

A host running an etcd member has the member removed first, as 'hactl etcd member remove' does:
refused when the members that remain would lose their quorum (unless --force), leadership moved off
it first, etcd stopped and disabled, its data dir moved aside, and hactl's backup schedule removed
from it (as 'hactl backup schedule --disable' does: without a member its timer fails). The plan is shown and confirmed
(--yes in scripts; --dry-run shows it only). A host left in the spec joins again (and its member
is added back) on the next 'hactl bootstrap'.

  hactl reset -f cluster.yaml --hosts w-c --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, c, _, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			opts := reset.Options{Cluster: c, Hosts: o.hosts, Prompt: terminalPrompter(s.In, s.Err), Printer: p, Force: o.force}
			return reset.Reset(cmd.Context(), opts, o.dryRun, func(plan reset.Plan) error {
				fmt.Fprintf(s.Out, "reset plan (nodes drained and deleted through %s):\n%s", plan.Via, plan)
				if o.dryRun {
					return nil
				}
				return confirmOrStop(s, o.yes, ", or --dry-run to see the plan only", fmt.Sprintf("reset %d host(s)?", len(plan.Hosts)))
			})
		},
	}
	cmd.Flags().StringSliceVar(&o.hosts, "hosts", nil, "the hosts to reset (comma-separated spec host names)")
	_ = cmd.RegisterFlagCompletionFunc("hosts", completeHosts("", true))
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.force, "force", false, "remove a host's etcd member even when the members left would lose their quorum")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "show the plan and change nothing")
	return cmd
}
