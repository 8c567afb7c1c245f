package deploy

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/hashicorp/go-multierror"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// SnapshotFinalizer is the EtcdSnapshots' finalizer (hactlv1.SnapshotProtectionFinalizer), which
// only the operator removes: ReleaseSnapshots drops it when the operator goes.
const SnapshotFinalizer = hactlv1.SnapshotProtectionFinalizer

// ReleaseNote is what `operator remove` reports for the EtcdSnapshots it leaves: the finalizer
// only the operator carries out is gone with it.
const ReleaseNote = "kept without their finalizer " + hactlv1.SnapshotProtectionFinalizer +
	" (only the operator carries it out): deleting one, or the namespace, now finishes and leaves the bucket untouched; a redeployed operator puts the finalizer back"

// ReleaseSnapshots runs once no operator replica is left in namespace (after Remove): every
// EtcdSnapshot there still carrying hactlv1.SnapshotProtectionFinalizer loses it (other finalizers
// stay), since only the operator removes it — left on, deleting the object or its namespace
// would hang forever. One being deleted already then goes; its snapshot stays in the bucket. It
// returns one Removed per object that was being deleted (Note says its key stays) and one summary
// for the objects kept (Kind "EtcdSnapshots", Name the namespace, Note ReleaseNote with the
// count); nothing when no object carries the finalizer or the CRD is gone. Errors: the list's,
// and every refused update (go-multierror), each naming the object.
func ReleaseSnapshots(ctx context.Context, dyn dynamic.Interface, namespace string) ([]Removed, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	ri := dyn.Resource(hactlv1.GroupVersion.WithResource("etcdsnapshots")).Namespace(namespace)
	list, err := ri.List(ctx, metav1.ListOptions{})
	if isGone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list EtcdSnapshots in %s: %w", namespace, err)
	}
	var out []Removed
	var errs *multierror.Error
	kept := 0
	for i := range list.Items {
		name := list.Items[i].GetName()
		if !slices.Contains(list.Items[i].GetFinalizers(), hactlv1.SnapshotProtectionFinalizer) {
			continue
		}
		deleting := false
		key := ""
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fs := u.GetFinalizers()
			if !slices.Contains(fs, hactlv1.SnapshotProtectionFinalizer) {
				return nil
			}
			deleting = u.GetDeletionTimestamp() != nil
			key, _, _ = unstructured.NestedString(u.Object, "spec", "key")
			u.SetFinalizers(slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == hactlv1.SnapshotProtectionFinalizer }))
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
			return err
		})
		switch {
		case isGone(err):
		case err != nil:
			errs = multierror.Append(errs, fmt.Errorf("EtcdSnapshot %s/%s: dropping the finalizer %s: %w", namespace, name, hactlv1.SnapshotProtectionFinalizer, err))
		case deleting:
			note := "was being deleted: gone now"
			if key != "" {
				note += "; its snapshot " + key + " stays in the bucket (hactl backup prune deletes it)"
			}
			out = append(out, Removed{Kind: "EtcdSnapshot", Name: namespace + "/" + name, Note: note})
		default:
			kept++
		}
	}
	if kept > 0 {
		out = append(out, Removed{Kind: "EtcdSnapshots", Name: namespace, Note: fmt.Sprintf("%d %s", kept, ReleaseNote)})
	}
	return out, errs.ErrorOrNil()
}
