package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/drill"
)

// newDrillCleanupCommand is `hactl drill cleanup`: drill.Cleanup.
func newDrillCleanupCommand(s Streams, g *globalOptions) *cobra.Command {
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Put back what an interrupted drill left: stopped units, iptables rules, hosts taken down",
		Long: `Reads the drill journal (<stateDir>/drill/active.json) and inspects every etcd member and LB host
for a drill's marker, its iptables chain (HACTL-DRILL) and its deadman timer. Hosts taken down with
--method host are brought back with the journal's --up-command (run here); every other host runs the
restore script (chain removed, units the marker lists started, deadman stopped, marker removed). The
journal is removed when everything is back. Exit 0 when everything is clean, 1 when something could not
be put back (named).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			p, c, logPath, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			var confirm func(string) (bool, error)
			if !dryRun {
				if confirm, err = confirmer(s, yes, ", or --dry-run to only see what is left"); err != nil {
					return err
				}
			}
			res, runErr := drill.Cleanup(cmd.Context(), drill.CleanupOptions{Cluster: c, Printer: p, Confirm: confirm, DryRun: dryRun,
				Prompt: terminalPrompter(s.In, s.Err)})
			if res != nil {
				if err := writeReport(s.Out, output, res, res.Print); err != nil {
					return err
				}
			}
			if runErr != nil && logPath != "" {
				fmt.Fprintf(s.Err, "debug log: %s\n", logPath)
			}
			return runErr
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation (scripts, CI)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only show what is left and what would be done")
	outputFlag(cmd, &output, "result", "")
	return cmd
}
