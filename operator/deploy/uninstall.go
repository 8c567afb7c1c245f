package deploy

import (
	"context"
	"errors"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
)

// Uninstall is `hactl operator remove`: Remove in namespace (default DefaultNamespace) for c's
// EtcdCluster, then the state dir's record of where the operator runs dropped when it names that
// namespace (Record), then with purge every EtcdSnapshot and the CRDs (Purge), a snapshot of
// deletionPolicy Delete deleted from spec.backup's object store (backup.Delete), and last, after
// Remove succeeded even when the state dir or Purge failed, ReleaseSnapshots: the EtcdSnapshots
// left lose the finalizer only the operator removes, so deleting them or the namespace later
// finishes. It returns every object deleted, found gone or released, in order, also on an error.
// Errors: Remove's (nothing after it runs), then the state dir's, Purge's (a Delete without
// spec.backup in c: the bucket cannot be reached, the object stays) and ReleaseSnapshots', joined.
func Uninstall(ctx context.Context, cfg *rest.Config, c *v1alpha1.Cluster, namespace string, purge bool) ([]Removed, error) {
	removed, err := Remove(ctx, cfg, namespace, c.Metadata.Name)
	if err != nil {
		return removed, err
	}
	if loc := Where(c, nil); loc.Namespace == namespace {
		err = Record(c, nil)
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
	// No replica is left to carry out the EtcdSnapshots' finalizer: whatever Purge did not delete
	// (or all without purge) loses it, also after an error above.
	dyn, derr := dynamic.NewForConfig(cfg)
	if derr != nil {
		return removed, errors.Join(err, derr)
	}
	more, rerr := ReleaseSnapshots(ctx, dyn, namespace)
	return append(removed, more...), errors.Join(err, rerr)
}
