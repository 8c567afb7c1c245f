package app

import (
	"github.com/spf13/cobra"
)

func newEtcdCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Day-2 operations on the etcd cluster: membership, compaction, defragmentation, alarms",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newEtcdMemberCommand(s, g), newEtcdDefragCommand(s, g), newEtcdCompactCommand(s, g), newEtcdAlarmCommand(s, g))
	return cmd
}
