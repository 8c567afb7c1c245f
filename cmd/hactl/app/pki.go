package app

import (
	"github.com/spf13/cobra"
)

func newPKICommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Inspect the cluster's certificates",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newPKICheckCommand(s, g))
	return cmd
}
