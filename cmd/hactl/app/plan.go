package app

import (
	"time"

	"github.com/spf13/cobra"
)

func newPlanCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &bootstrapOptions{waitTimeout: 2 * time.Minute} // unused: plan starts nothing
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what bootstrap would change on which host (same as bootstrap --dry-run)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.dryRun = true
			return runBootstrap(cmd, s, g, o)
		},
	}
	o.addFlags(cmd, false)
	cmd.Flags().BoolVar(&o.detailedExitCode, "detailed-exitcode", false, "exit 0 when the plan changes nothing and 4 when it has changes (2 and 3 keep their meaning): for CI drift checks")
	return cmd
}
