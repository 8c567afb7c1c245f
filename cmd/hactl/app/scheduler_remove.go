package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubesched"
)

func newSchedulerRemoveCommand(s Streams, g *globalOptions) *cobra.Command {
	var yes bool
	f := &schedulerFlags{}
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Take hactl-scheduler out: static pods' files moved aside on the control planes, or the Deployment and its objects deleted",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, c, sch, closeLog, err := schedulerTarget(cmd, s, g, f, true)
			if err != nil {
				return err
			}
			defer closeLog()
			what := "the Deployment (its pods gone first), its Lease, the PodDisruptionBudget, ConfigMap, ServiceAccount and RBAC of hactl-scheduler in kube-system (through " + f.kubeconfig + ")"
			if f.kubeconfig == "" {
				what = "hactl-scheduler's static pod on every control plane (manifest and " + kubesched.Dir + " moved to " + kubesched.BackupDir + "), then, once kubelet has stopped every one (no replica renews the Lease), its Lease and RBAC"
			}
			fmt.Fprintf(s.Err, "Plan: remove %s. Pods with schedulerName %s stay Pending until it is back.\n", what, sch.SchedulerName)
			if err := confirmOrStop(s, yes, "", "Remove hactl-scheduler?"); err != nil {
				return err
			}
			if f.kubeconfig == "" {
				return kubesched.RemoveStatic(cmd.Context(), c, terminalPrompter(s.In, s.Err), p, time.Now())
			}
			api, err := f.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer api.Close()
			if err := kubesched.RemoveThroughAPI(cmd.Context(), api, sch); err != nil {
				return api.Wrap(err)
			}
			p.Infof("hactl-scheduler removed")
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	f.add(cmd, false)
	return cmd
}
