package app

import (
	"github.com/spf13/cobra"
)

type backupListOptions struct{ output string }

func newBackupListCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the complete snapshots (those whose metadata object exists), oldest first",
		Long: `Lists the snapshots under <prefix>/<metadata.name>/snapshots/. Only complete snapshots (whose metadata
object exists and names the data object) are listed; data objects without metadata and unfinished
multipart uploads are counted on stderr (prune cleans them after a grace period) and shown in -o json.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			env, l, err := openListing(cmd.Context(), s, g)
			if err != nil {
				return err
			}
			for _, w := range l.Warnings() {
				env.p.Warnf("%s", w)
			}
			return writeReport(s.Out, o.output, l, l.Print)
		},
	}
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}
