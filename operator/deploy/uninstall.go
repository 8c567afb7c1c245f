package deploy

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
)

// Uninstall is `hactl operator remove`: Remove in namespace (default DefaultNamespace) for c's
// EtcdCluster, then the state dir's record of where the operator runs dropped when it names that
// namespace (Record), then with purge every EtcdSnapshot and the CRDs (Purge), a snapshot of
// deletionPolicy Delete deleted from spec.backup's object store (backup.Delete). It returns every
// object deleted or found gone, in order, also on an error. Errors: Remove's, the state dir's,
// Purge's (a Delete without spec.backup in c: the bucket cannot be reached, the object stays).
func Uninstall(ctx context.Context, cfg *rest.Config, c *v1alpha1.Cluster, namespace string, purge bool) ([]Removed, error) {
	removed, err := Remove(ctx, cfg, namespace, c.Metadata.Name)
	if err == nil {
		if loc := Where(c, nil); loc.Namespace == namespace {
			err = Record(c, nil)
		}
	}
	if err == nil && purge {
		var more []Removed
		more, err = Purge(ctx, cfg, namespace, c.Metadata.Name, func(ctx context.Context, stem string) error {
			if c.Spec.Backup == nil {
				return errors.New("the spec has no spec.backup: hactl cannot reach the bucket to carry out deletionPolicy Delete")
			}
			store, err := backup.OpenStore(ctx, c, backup.StoreOptions{})
			if err != nil {
				return err
			}
			l, err := backup.ListCluster(ctx, store, c)
			if err != nil {
				return err
			}
			return backup.Delete(ctx, store, l, stem)
		})
		removed = append(removed, more...)
	}
	return removed, err
}
