package app

import (
	"github.com/spf13/cobra"
)

func newEtcdMemberCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "Change the etcd cluster's membership safely (quorum-guarded)",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newEtcdMemberRemoveCommand(s, g), newEtcdMemberReplaceCommand(s, g))
	return cmd
}
