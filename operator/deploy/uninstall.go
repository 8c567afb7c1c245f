package deploy

import (
	"context"
	"errors"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
)

// Uninstall is `hactl operator remove`: refused with a *DriftError (nothing removed) while the
// EtcdCluster records heals cluster.yaml (c) does not show yet (checkDrift); else Remove in
// namespace (default DefaultNamespace) for c's EtcdCluster, then the state dir's record of where
// the operator runs dropped when it names that namespace (Record), then with purge every EtcdSnapshot and the CRDs (Purge), a snapshot of
// deletionPolicy Delete deleted from spec.backup's object store (backup.Delete), and last, after
// Remove succeeded even when the state dir or Purge failed, ReleaseSnapshots: the EtcdSnapshots
// left lose the finalizer only the operator removes, so deleting them or the namespace later
// finishes. It returns every object deleted, found gone or released, in order, also on an error.
// Errors: checkDrift's and Remove's (nothing after them runs), then the state dir's, Purge's (a Delete without
// spec.backup in c: the bucket cannot be reached, the object stays) and ReleaseSnapshots', joined.
func Uninstall(ctx context.Context, cfg *rest.Config, c *v1alpha1.Cluster, namespace string, purge bool) ([]Removed, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkDrift(ctx, dyn, namespace, c); err != nil {
		return nil, err
	}
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
	more, rerr := ReleaseSnapshots(ctx, dyn, namespace)
	return append(removed, more...), errors.Join(err, rerr)
}

// checkDrift refuses (*DriftError) to remove the operator while the EtcdCluster c.Metadata.Name in
// namespace records heals that c does not show yet (Drift): status.heals is the only record of
// them, the one `hactl bootstrap` checks before it acts, and it goes with the EtcdCluster, after
// which a bootstrap on the old spec would put the lost member back. No EtcdCluster (or no CRD):
// nothing to check. Errors: the API's, the conversion's.
func checkDrift(ctx context.Context, dyn dynamic.Interface, namespace string, c *v1alpha1.Cluster) error {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	ec, err := getEtcdCluster(ctx, dyn, namespace, c.Metadata.Name)
	if err != nil || ec == nil {
		return err
	}
	if d := Drift(c, ec.Status.Heals); len(d) > 0 {
		return &DriftError{Drift: d}
	}
	return nil
}
