package app

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/ui"
)

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

// backupEnv is what every backup subcommand starts from: the spec and the object store.
type backupEnv struct {
	c     *v1alpha1.Cluster
	p     *ui.Printer
	store *backup.S3
}

// openBackup loads the spec and opens spec.backup's object store (backup.OpenStore: exit 2 when
// something is missing locally, 1 when the bucket check fails).
func openBackup(ctx context.Context, s Streams, g *globalOptions) (*backupEnv, error) {
	p := ui.New(s.Err, g.verbose, false)
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return nil, err
	}
	st, err := backup.OpenStore(ctx, c, backup.StoreOptions{Source: g.file, Getenv: os.Getenv})
	if err != nil {
		return nil, err
	}
	return &backupEnv{c: c, p: p, store: st}, nil
}

// openListing is openBackup followed by the listing of the cluster's snapshots.
func openListing(ctx context.Context, s Streams, g *globalOptions) (*backupEnv, *backup.Listing, error) {
	env, err := openBackup(ctx, s, g)
	if err != nil {
		return nil, nil, err
	}
	l, err := backup.ListCluster(ctx, env.store, env.c)
	if err != nil {
		return nil, nil, err
	}
	return env, l, nil
}

// identityEnv is backup.IdentityEnv: the default of --identity-file, in the help texts.
const identityEnv = backup.IdentityEnv
