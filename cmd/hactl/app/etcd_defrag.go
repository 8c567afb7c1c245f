package app

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/etcd/maintenance"
	"github.com/hactl/hactl/ui"
)

func newEtcdDefragCommand(s Streams, g *globalOptions) *cobra.Command {
	var minFrag float64
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "defrag",
		Short: "Defragment the members one at a time, followers first, the leader last",
		Long: `Defragments each member's database (its free pages given back to the filesystem), one member at
a time because a member blocks its reads and writes while it defragments: followers first, the
leader last, each checked serving again before the next. Members under --min-fragmentation (the
share of the database file not in use, as hactl status shows it) are skipped. Every member must be
healthy first. Compact first (hactl etcd compact) for the history's pages to be free.

  hactl etcd defrag -f cluster.yaml --min-fragmentation 30 --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			if err := maintenance.ValidateMinFragmentation(minFrag); err != nil {
				return err
			}
			confirm, err := planConfirm(s, yes || dryRun, "Defragment?")
			if err != nil {
				return err
			}
			p, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := maintenance.Defrag(cmd.Context(), maintenance.DefragOptions{Cluster: cl, MinFragmentation: minFrag, DryRun: dryRun, Confirm: confirm, Printer: p})
			if res != nil && len(res.Members) > 0 && !errors.Is(err, maintenance.ErrNotConfirmed) {
				if werr := writeReport(s.Out, output, res, func(w io.Writer) { printDefrag(w, res) }); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	cmd.Flags().Float64Var(&minFrag, "min-fragmentation", 0, "skip members with less of their database file free than this, in percent (0-100; default 0: every member)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the order and the fragmentation, change nothing")
	outputFlag(cmd, &output, "output", "")
	return cmd
}

func printDefrag(w io.Writer, r *maintenance.DefragResult) {
	var rows [][]string
	for _, m := range r.Members {
		role, after, took := "follower", "-", "-"
		if m.Leader {
			role = "leader"
		}
		if m.Skipped == "" {
			after, took = fmt.Sprintf("%.1f MiB", float64(m.AfterBytes)/(1<<20)), fmt.Sprintf("%.0fms", m.DurationMs)
		} else {
			after = "skipped: " + m.Skipped
		}
		rows = append(rows, []string{m.Name, role, fmt.Sprintf("%.1f MiB", float64(m.BeforeBytes)/(1<<20)), fmt.Sprintf("%.1f%%", m.FragmentationPercent), after, took})
	}
	ui.Table(w, []string{"MEMBER", "ROLE", "DB BEFORE", "FREE", "DB AFTER", "TOOK"}, rows)
}
