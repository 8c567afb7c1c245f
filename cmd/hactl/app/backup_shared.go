package app

import (
	"context"
	"os"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/ui"
)

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
