package drill

import (
	"context"
	"fmt"
	"os"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
)

// NewestSnapshot is the restore drill's choice of snapshot: the newest complete snapshot of c in
// spec.backup's object store (specFile is the spec's path, for the store's relative paths and
// messages; credentials from the environment) and the delta snapshots that continue it, which bring
// the restorable point forward (SnapshotRef.DeltasTo, DeltasAt). It returns nil when the store holds
// no complete snapshot of c. Errors: opening or listing the store, and a delta chain that does not
// continue the snapshot (the restore would refuse it after the disaster: it is refused now).
func NewestSnapshot(ctx context.Context, c *v1alpha1.Cluster, specFile string) (*SnapshotRef, error) {
	st, err := backup.OpenStore(ctx, c, backup.StoreOptions{Source: specFile, Getenv: os.Getenv})
	if err != nil {
		return nil, err
	}
	l, err := backup.ListCluster(ctx, st, c)
	if err != nil {
		return nil, err
	}
	sn := l.Latest()
	if sn == nil {
		return nil, nil
	}
	ref := &SnapshotRef{Key: sn.Data.Key, Revision: sn.Metadata.Revision, TakenAt: sn.Metadata.StartedAt}
	ds, err := backup.ListDeltas(ctx, st, c.Spec.Backup.ObjectStore.Prefix, c.Metadata.Name)
	if err != nil {
		return nil, err
	}
	chain, err := backup.Chain(ds, sn.Metadata.Revision)
	if err != nil {
		return nil, fmt.Errorf("the deltas continuing %s: %w", sn.Data.Key, err)
	}
	if len(chain) > 0 {
		last := chain[len(chain)-1].Metadata
		ref.DeltasTo, ref.DeltasAt = last.ToRevision, last.CompletedAt
	}
	return ref, nil
}

// RestoredSnapshot is the SnapshotRef of snap (a stored backup, or a local file: its path and
// revision) brought forward by delta snapshots up to last (nil: none applied).
func RestoredSnapshot(snap *backup.Resolved, last *backup.DeltaMetadata) SnapshotRef {
	ref := SnapshotRef{Key: snap.Path, Revision: snap.Revision}
	if m := snap.Metadata; m != nil {
		ref.Key, ref.Revision, ref.TakenAt = m.Key, m.Revision, m.StartedAt
	}
	if last != nil {
		ref.DeltasTo, ref.DeltasAt = last.ToRevision, last.CompletedAt
	}
	return ref
}
