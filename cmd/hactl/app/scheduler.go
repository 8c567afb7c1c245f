package app

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubesched"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

func newSchedulerCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "hactl-scheduler: render its configuration, deploy it as HA static pods, show its Lease",
		Long: `hactl-scheduler is kube-scheduler with hactl's plugins (ZonePreference, MaintenanceGuard,
RecordingBinder), for pods that set schedulerName: hactl-scheduler (spec.scheduler.schedulerName).
Its replicas elect a leader on their own Lease (kube-system/hactl-scheduler by default).

  hactl scheduler config -f cluster.yaml          # the KubeSchedulerConfiguration spec.scheduler gives
  make scheduler-image                            # bin/hactl-scheduler-image.tar, FROM scratch
  hactl scheduler deploy -f cluster.yaml --image-archive bin/hactl-scheduler-image.tar
  hactl scheduler status -f cluster.yaml          # replicas, Lease holder, renew time, transitions`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSchedulerConfigCommand(s, g), newSchedulerDeployCommand(s, g), newSchedulerStatusCommand(s, g))
	return cmd
}

func newSchedulerConfigCommand(s Streams, g *globalOptions) *cobra.Command {
	var inCluster bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the KubeSchedulerConfiguration (v1) of spec.scheduler",
		Long: `Prints the KubeSchedulerConfiguration hactl deploys: profile spec.scheduler.schedulerName with
ZonePreference (spec.scheduler.preferredZones), MaintenanceGuard and RecordingBinder, NodeResourcesFit
scoring by spec.scheduler.binPacking (NodeResourcesBalancedAllocation disabled), and Lease leader
election with spec.scheduler.leaderElection. hactl checks spec.scheduler itself (exit 2 with the
field path); the scheduler's own check of the file is 'hactl-scheduler validate --config FILE',
which 'hactl scheduler deploy' runs on the hosts before it swaps a configuration in.

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

func newSchedulerDeployCommand(s Streams, g *globalOptions) *cobra.Command {
	o := kubesched.DeployOptions{}
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Run hactl-scheduler as a static pod on every control-plane host (over SSH)",
		Long: fmt.Sprintf(`Deploys hactl-scheduler on every control-plane host as the static pod %s:
the image (imported into containerd from --image-archive or spec.scheduler.imageArchive when a host
lacks it, else pulled), %s with a kubeconfig for the user %s made on the host
(kubeadm kubeconfig user: the CA key stays there), the configuration (checked by
'hactl-scheduler validate' in that image before it replaces the running one), and the RBAC a second
scheduler needs (kube-scheduler's ClusterRoles, its own Lease, the authentication reader). Then it
waits until a replica holds the Lease. A re-run with the same spec changes nothing.

  hactl scheduler deploy -f cluster.yaml --image-archive bin/hactl-scheduler-image.tar
  hactl scheduler deploy -f cluster.yaml --dry-run      # the files and the RBAC, no host contacted`,
			kubesched.ManifestFile, kubesched.Dir, kubesched.User),
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, c, _, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			o.Cluster, o.Out, o.Printer, o.Prompt = c, s.Out, p, terminalPrompter(s.In, s.Err)
			return kubesched.Deploy(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.ImageArchive, "image-archive", "", "a docker save / OCI archive of the image (make scheduler-image writes bin/hactl-scheduler-image.tar)")
	cmd.Flags().StringVar(&o.Image, "image", "", "the image reference (default spec.scheduler.image, or the one the archive holds)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print the files and RBAC it would write; contact no host")
	cmd.Flags().DurationVar(&o.Wait, "wait", 2*time.Minute, "how long to wait for a Lease holder after the manifests are in place")
	return cmd
}

func newSchedulerStatusCommand(s Streams, g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show hactl-scheduler's replicas and its Lease (holder, renew time, transitions)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return &UsageError{Err: fmt.Errorf("-o %s: table or json", output)}
			}
			_, c, _, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			if c.Spec.Scheduler == nil {
				return &UsageError{Err: fmt.Errorf("%s: spec.scheduler: the spec has no scheduler section", g.file)}
			}
			d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: terminalPrompter(s.In, s.Err)})
			if err != nil {
				return fmt.Errorf("ssh: %w", err)
			}
			defer d.Close()
			st, err := kubesched.ReadStatus(cmd.Context(), d, c, c.Spec.Scheduler)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			l := st.Lease
			renew := "-"
			if !l.RenewTime.IsZero() {
				renew = fmt.Sprintf("%s (%s ago)", l.RenewTime.Format(time.RFC3339), time.Since(l.RenewTime).Round(time.Second))
			}
			fmt.Fprintf(s.Out, "Lease %s/%s: holder %s, renewed %s, %d transitions\n\n", l.Namespace, l.Name, orDefault(l.Holder, "none"), renew, l.Transitions)
			tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "POD\tNODE\tREADY\tRESTARTS\tLEADER")
			for _, r := range st.Replicas {
				fmt.Fprintf(tw, "%s\t%s\t%t\t%d\t%t\n", r.Pod, r.Node, r.Ready, r.Restarts, r.Leader)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func newMaintenanceCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "maintenance",
		Short: "Mark a node for maintenance (hactl-scheduler places no new pod on it) or clear the mark",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var reason string
	mk := func(on bool) *cobra.Command {
		use, short := "end NODE", "Clear the maintenance mark of NODE"
		if on {
			use, short = "start NODE", "Mark NODE for maintenance: label hactl.io/maintenance=true, annotations since and reason"
		}
		c := &cobra.Command{
			Use: use, Short: short,
			Args: usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, args []string) error {
				p, c, _, closeLog, err := hostRun(s, g)
				if err != nil {
					return err
				}
				defer closeLog()
				if err := kubesched.SetMaintenance(cmd.Context(), c, terminalPrompter(s.In, s.Err), args[0], on, reason, time.Now()); err != nil {
					return err
				}
				state := "under maintenance: hactl-scheduler places no new pod on it (pods on it stay; drain them separately)"
				if !on {
					state = "out of maintenance"
				}
				p.Infof("%s is %s", args[0], state)
				return nil
			},
		}
		if on {
			c.Flags().StringVar(&reason, "reason", "", "why (shown in the pods' unschedulable reason)")
		}
		return c
	}
	cmd.AddCommand(mk(true), mk(false))
	return cmd
}
