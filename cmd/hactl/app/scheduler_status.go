package app

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubesched"
	"github.com/hactl/hactl/status"
)

func newSchedulerStatusCommand(s Streams, g *globalOptions) *cobra.Command {
	var output string
	f := &schedulerFlags{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show hactl-scheduler's replicas and its Lease (holder, renew time, transitions)",
		Long: `Reads hactl-scheduler's Lease (holderIdentity, renewTime, leaseTransitions) and its pods (static
pods or the Deployment's, label app.kubernetes.io/name=hactl-scheduler in kube-system): over SSH
through a control plane (-f cluster.yaml), or through --kubeconfig. A replica is the leader when the
holderIdentity's hostname is its node (static pods) or its pod name (Deployment). Exit 3 when
replicas are deployed but none holds the Lease, the holder stopped renewing (no renewal for twice the
lease duration), or a replica is not Ready; hactl status shows the same section.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			_, c, sch, closeLog, err := schedulerTarget(cmd, s, g, f, true)
			if err != nil {
				return err
			}
			defer closeLog()
			api, err := apiClient(cmd, s, c, f.kubeFlags)
			if err != nil {
				return err
			}
			defer api.Close()
			st, err := kubesched.ReadStatus(cmd.Context(), api, sch)
			if err != nil {
				return api.Wrap(err)
			}
			problems := status.SchedulerProblems(st, sch, time.Now())
			verdict := func() error {
				if len(problems) == 0 {
					return nil
				}
				return &VerdictError{Err: fmt.Errorf("hactl-scheduler is degraded: %s", strings.Join(problems, "; "))}
			}
			if machineOutput(output) {
				if err := writeReport(s.Out, output, st, nil); err != nil {
					return err
				}
				return verdict()
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
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(st.Replicas) == 0 {
				fmt.Fprintln(s.Out, "not deployed: hactl scheduler deploy")
			}
			return verdict()
		},
	}
	outputFlag(cmd, &output, "output", "")
	f.add(cmd, false)
	return cmd
}
