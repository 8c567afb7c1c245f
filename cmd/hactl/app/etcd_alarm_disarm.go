package app

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/etcd/maintenance"
)

func newEtcdAlarmDisarmCommand(s Streams, g *globalOptions) *cobra.Command {
	var retain int64
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "disarm",
		Short: "Clear the active alarms; NOSPACE: compact, defragment every member, then disarm",
		Long: `Clears the active alarms. For NOSPACE (the database reached its quota; etcd then refuses writes)
it runs etcd's recovery in order, after the plan is confirmed: compact the history (keeping
--retain revisions), defragment every member one at a time with the leader last, then disarm; an
alarm etcd raises again (the data itself is over the quota: raise spec.etcd's quota) is reported.
A CORRUPT alarm is never disarmed by hactl (exit 3): replace that member or restore.

  hactl etcd alarm disarm -f cluster.yaml --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			if err := maintenance.ValidateRetain(retain); err != nil {
				return err
			}
			confirm, err := planConfirm(s, yes || dryRun, "Run it?")
			if err != nil {
				return err
			}
			p, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := maintenance.Disarm(cmd.Context(), maintenance.DisarmOptions{Cluster: cl, Retain: retain, DryRun: dryRun, Confirm: confirm, Printer: p})
			if res != nil && !errors.Is(err, maintenance.ErrNotConfirmed) {
				if werr := writeReport(s.Out, output, res, func(w io.Writer) {
					fmt.Fprint(w, res.Plan)
					if len(res.Disarmed) > 0 {
						fmt.Fprintf(w, "disarmed %d alarm(s)\n", len(res.Disarmed))
					}
					if len(res.Remaining) > 0 {
						fmt.Fprintln(w, "still active:")
						printAlarms(w, res.Remaining)
					}
				}); werr != nil {
					return werr
				}
			}
			if err == nil && len(res.Remaining) > 0 {
				return &VerdictError{Err: fmt.Errorf("%d alarm(s) still active after the recovery: the data itself exceeds the quota; raise it or delete data", len(res.Remaining))}
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&retain, "retain", 0, "NOSPACE: most recent revisions the compaction keeps (default 0: only the current one)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the plan, change nothing")
	outputFlag(cmd, &output, "output", "")
	return cmd
}
