package app

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/etcd/maintenance"
)

func newEtcdAlarmListCommand(s Streams, g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the active alarms (NOSPACE, CORRUPT) with their members",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			_, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			as, err := maintenance.Alarms(cmd.Context(), cl)
			if err != nil {
				return err
			}
			return writeReport(s.Out, output, as, func(w io.Writer) { printAlarms(w, as) })
		},
	}
	outputFlag(cmd, &output, "output", "")
	return cmd
}
