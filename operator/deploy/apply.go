package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/backup"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// FieldManager is hactl's server-side apply field manager.
const FieldManager = "hactl"

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := hactlv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

func kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("%w %T: %v", errUnknownKind, obj, err)
	}
	return gvks[0], nil
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// Apply server-side applies the plan's objects in order through the dynamic client (forcing
// hactl's ownership of the fields it sets), resolving each kind through discovery; after the CRDs
// it waits (up to 1 minute) until the API serves them. progress, when set, is told each object.
// Errors: the first object the API refused, named by kind and namespace/name.
func (p *Plan) Apply(ctx context.Context, cfg *rest.Config, progress func(kind, name string)) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	for _, u := range p.Objects {
		gvk := u.GroupVersionKind()
		if gvk.Kind == "EtcdCluster" || gvk.Kind == "EtcdSnapshot" {
			if err := waitServed(ctx, mapper, cached, gvk); err != nil {
				return err
			}
		}
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, name(u), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, name(u), err)
		}
		if progress != nil {
			progress(gvk.Kind, name(u))
		}
	}
	return nil
}

// waitServed waits until discovery lists gvk (a CRD just applied becomes served a moment later).
func waitServed(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, cached discovery.CachedDiscoveryInterface, gvk schema.GroupVersionKind) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return true, nil
		}
		cached.Invalidate()
		mapper.Reset()
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the API does not serve %s after its CRD was applied: %w", gvk, err)
	}
	return nil
}

func name(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// Removed is one object Remove deleted or found gone.
type Removed struct {
	Kind, Name string
	// Gone: it did not exist.
	Gone bool
	// Note, when set, says what happened instead of a deletion.
	Note string
}

// Remove deletes what Build made for the EtcdCluster clusterName in namespace, except the CRDs,
// the namespace and every EtcdSnapshot (their objects in the bucket are never touched): the
// Deployment first (no replica acts any more), then the replicas' Lease (a leftover holder would
// delay a later deploy by a leaseDuration), the PodDisruptionBudget, the EtcdCluster, the
// Secrets and the RBAC. Objects already gone are reported, not errors. Errors: a heal in
// progress (*HealInProgressError, nothing deleted), the first refused delete, named.
func Remove(ctx context.Context, cfg *rest.Config, namespace, clusterName string) ([]Removed, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return remove(ctx, dyn, namespace, clusterName)
}

// HealInProgressError refuses to remove the operator while its EtcdCluster records a member
// replacement in progress (status.healing): only the operator finishes or rolls it back, and the
// record goes with the EtcdCluster, so etcd would keep an unpromoted learner (one blocks every
// later learner join) or run a member short.
type HealInProgressError struct {
	EtcdCluster string // namespace/name
	Healing     hactlv1.HealingStatus
	// DeploymentGone: the heal began while the Deployment was being deleted (the EtcdCluster and
	// what follows it are kept).
	DeploymentGone bool
}

func (e *HealInProgressError) Error() string {
	h := e.Healing
	msg := fmt.Sprintf("EtcdCluster %s records a heal in progress (member %s onto spare %s, step %s since %s): only the operator finishes or rolls it back, and removing it now would leave etcd with a learner never promoted or a member short; ",
		e.EtcdCluster, h.Member, h.Spare, h.Step, h.StepAt.UTC().Format(time.RFC3339))
	if e.DeploymentGone {
		return msg + "it began while the Deployment was being deleted, so the EtcdCluster and what follows it stay: run hactl operator deploy for the operator to finish it, then hactl operator remove again"
	}
	return msg + "nothing was removed: wait until hactl status shows no heal in progress, then run hactl operator remove again"
}

// healInProgress reads the EtcdCluster clusterName in namespace: a *HealInProgressError when its
// status records a heal, nil when none or when it is gone. Errors: the API's, the conversion's.
func healInProgress(ctx context.Context, dyn dynamic.Interface, namespace, clusterName string) error {
	c, err := getEtcdCluster(ctx, dyn, namespace, clusterName)
	if err != nil || c == nil {
		return err
	}
	if c.Status.Healing != nil {
		return &HealInProgressError{EtcdCluster: namespace + "/" + clusterName, Healing: *c.Status.Healing}
	}
	return nil
}

// remove is Remove through dyn.
func remove(ctx context.Context, dyn dynamic.Interface, namespace, clusterName string) ([]Removed, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if err := healInProgress(ctx, dyn, namespace, clusterName); err != nil {
		return nil, err
	}
	targets := []struct {
		gvr        schema.GroupVersionResource
		kind, name string
	}{
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", Name},
		{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, "Lease", Name},
		{schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, "PodDisruptionBudget", Name},
		{hactlv1.GroupVersion.WithResource("etcdclusters"), "EtcdCluster", clusterName},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", ClientSecret},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", S3Secret},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", S3CASecret},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", SSHKeySecret},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, "RoleBinding", Name},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, "Role", Name},
		{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "ServiceAccount", Name},
	}
	// The spares' certificate Secrets (private keys): as many as spares were deployed, found by
	// their prefix among the Secrets hactl labelled.
	secrets, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(namespace).
		List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + Name + ",app.kubernetes.io/managed-by=hactl"})
	if err != nil && !isGone(err) {
		return nil, fmt.Errorf("list the Secrets of %s in %s: %w", Name, namespace, err)
	}
	if secrets != nil {
		for _, u := range secrets.Items {
			if strings.HasPrefix(u.GetName(), SpareSecretPrefix) {
				targets = append(targets, struct {
					gvr        schema.GroupVersionResource
					kind, name string
				}{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", u.GetName()})
			}
		}
	}
	var out []Removed
	policy := metav1.DeletePropagationForeground
	for _, tg := range targets {
		if tg.kind == "EtcdCluster" {
			// A heal the leader began while the Deployment was being deleted: its record stays.
			if err := healInProgress(ctx, dyn, namespace, clusterName); err != nil {
				var hip *HealInProgressError
				if errors.As(err, &hip) {
					hip.DeploymentGone = true
				}
				return out, err
			}
		}
		ri := dyn.Resource(tg.gvr).Namespace(namespace)
		err := ri.Delete(ctx, tg.name, metav1.DeleteOptions{PropagationPolicy: &policy})
		if err == nil && tg.kind == "Deployment" {
			// Foreground: the Deployment goes once its pods have; nothing else is deleted while a
			// replica may still act.
			err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				_, gerr := ri.Get(ctx, tg.name, metav1.GetOptions{})
				if isGone(gerr) {
					return true, nil
				}
				return false, nil
			})
			if err != nil {
				return out, fmt.Errorf("the Deployment %s/%s is still there 2m after its deletion (its pods still terminating?): %w", namespace, tg.name, err)
			}
		}
		switch {
		case err == nil:
			out = append(out, Removed{Kind: tg.kind, Name: namespace + "/" + tg.name})
		case isGone(err):
			out = append(out, Removed{Kind: tg.kind, Name: namespace + "/" + tg.name, Gone: true})
		default:
			return out, fmt.Errorf("delete %s %s/%s: %w", tg.kind, namespace, tg.name, err)
		}
	}
	return out, nil
}

// Purge runs after Remove (no replica acts any more): every EtcdSnapshot of clusterName in
// namespace goes, each by its own deletionPolicy, carried out here since the operator is gone: for
// Delete, deleteSnapshot(stem) deletes the snapshot from the bucket first (backup.Delete: never
// the newest verified one; refused, the object stays and the error says why); for Retain (what
// the operator's mirror makes) nothing in the bucket is touched. The finalizer is then dropped and
// the object deleted. Last, the CRDs go, unless an EtcdCluster or EtcdSnapshot of another cluster
// or namespace is left (the CRDs are cluster-wide: deleting them would delete those too).
// Errors: every refused deletion (go-multierror), the API's.
func Purge(ctx context.Context, cfg *rest.Config, namespace, clusterName string, deleteSnapshot func(ctx context.Context, stem string) error) ([]Removed, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	var out []Removed
	var errs *multierror.Error
	snaps := dyn.Resource(hactlv1.GroupVersion.WithResource("etcdsnapshots"))
	list, err := snaps.Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !isGone(err) {
		return nil, fmt.Errorf("list EtcdSnapshots in %s: %w", namespace, err)
	}
	if list != nil {
		for i := range list.Items {
			u := &list.Items[i]
			var sn hactlv1.EtcdSnapshot
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sn); err != nil {
				errs = multierror.Append(errs, err)
				continue
			}
			if sn.Spec.ClusterName != clusterName {
				continue
			}
			key := sn.Spec.Key
			if key == "" {
				key = sn.Status.Key
			}
			if sn.Spec.DeletionPolicy == hactlv1.DeletionDelete && key != "" {
				switch err := deleteSnapshot(ctx, key); {
				case errors.Is(err, backup.ErrNewestVerified):
					out = append(out, Removed{Kind: "snapshot in the bucket", Name: key, Note: "kept: the newest verified snapshot is never deleted"})
				case err != nil:
					errs = multierror.Append(errs, fmt.Errorf("EtcdSnapshot %s/%s (deletionPolicy Delete): snapshot %s: %w", namespace, sn.Name, key, err))
					continue
				default:
					out = append(out, Removed{Kind: "snapshot in the bucket", Name: key})
				}
			}
			if len(sn.Finalizers) > 0 {
				patch := []byte(`{"metadata":{"finalizers":null}}`)
				if _, err := snaps.Namespace(namespace).Patch(ctx, sn.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !isGone(err) {
					errs = multierror.Append(errs, fmt.Errorf("EtcdSnapshot %s/%s: dropping the finalizer: %w", namespace, sn.Name, err))
					continue
				}
			}
			if err := snaps.Namespace(namespace).Delete(ctx, sn.Name, metav1.DeleteOptions{}); err != nil && !isGone(err) {
				errs = multierror.Append(errs, fmt.Errorf("delete EtcdSnapshot %s/%s: %w", namespace, sn.Name, err))
				continue
			}
			out = append(out, Removed{Kind: "EtcdSnapshot", Name: namespace + "/" + sn.Name})
		}
	}
	if errs.ErrorOrNil() != nil {
		return out, errs
	}
	// The CRDs only when nothing else uses them.
	for _, res := range []string{"etcdclusters", "etcdsnapshots"} {
		l, err := dyn.Resource(hactlv1.GroupVersion.WithResource(res)).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil && !isGone(err) {
			return out, fmt.Errorf("list %s: %w", res, err)
		}
		if l != nil && len(l.Items) > 0 {
			out = append(out, Removed{Kind: "CustomResourceDefinitions", Name: "etcdclusters, etcdsnapshots", Note: fmt.Sprintf("kept: %s %s/%s still uses them", res, l.Items[0].GetNamespace(), l.Items[0].GetName())})
			return out, nil
		}
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, n := range []string{"etcdclusters." + hactlv1.GroupVersion.Group, "etcdsnapshots." + hactlv1.GroupVersion.Group} {
		err := crds.Delete(ctx, n, metav1.DeleteOptions{})
		switch {
		case err == nil:
			out = append(out, Removed{Kind: "CustomResourceDefinition", Name: n})
		case isGone(err):
			out = append(out, Removed{Kind: "CustomResourceDefinition", Name: n, Gone: true})
		default:
			return out, fmt.Errorf("delete CustomResourceDefinition %s: %w", n, err)
		}
	}
	// A CRD's deletion finishes after the API server has deleted its objects (its
	// customresourcecleanup finalizer): wait for that, so that a deploy right after finds no CRD
	// still terminating.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range []string{"etcdclusters." + hactlv1.GroupVersion.Group, "etcdsnapshots." + hactlv1.GroupVersion.Group} {
			if _, err := crds.Get(ctx, n, metav1.GetOptions{}); !isGone(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return out, fmt.Errorf("the CustomResourceDefinitions are still there 2m after their deletion: %w", err)
	}
	return out, nil
}

// isGone: the object or its kind (a CRD never installed) does not exist.
func isGone(err error) bool { return apierrors.IsNotFound(err) }
