package app

import "github.com/spf13/cobra"

func newBackupCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Snapshot etcd into object storage; list, verify and prune the snapshots",
		Long: `Backups live in the S3-compatible bucket of spec.backup, under <prefix>/<metadata.name>/snapshots/.

  hactl backup now -f cluster.yaml                  stream a snapshot of the leader into the bucket
  hactl backup list -f cluster.yaml                 complete snapshots (those with their metadata object)
  hactl backup verify latest --identity-file KEY    download and check one (sha256, etcd's integrity check)
  hactl backup prune --keep-last 288 --keep-daily 14   apply retention (asks first)

The access key comes from the environment variables or the file spec.backup.objectStore.credentials
names; never from the spec, the command line or logs.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBackupNowCommand(s, g), newBackupListCommand(s, g), newBackupVerifyCommand(s, g), newBackupPruneCommand(s, g), newBackupScheduleCommand(s, g), newBackupAgentCommand(s, g))
	return cmd
}
