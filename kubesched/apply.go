package kubesched

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// FieldManager is hactl's field manager in server-side apply.
const FieldManager = "hactl"

// Apply server-side applies each object (forcing hactl's ownership of the fields it sets), in order.
// Errors: the first object the API refused, named by kind and name.
func Apply(ctx context.Context, cs kubernetes.Interface, objects []any) error {
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	for _, o := range objects {
		data, err := json.Marshal(o)
		if err != nil {
			return err
		}
		var kind, name string
		switch v := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			kind, name = "ClusterRoleBinding", v.Name
			_, err = cs.RbacV1().ClusterRoleBindings().Patch(ctx, v.Name, types.ApplyPatchType, data, opts)
		case *rbacv1.Role:
			kind, name = "Role", v.Namespace+"/"+v.Name
			_, err = cs.RbacV1().Roles(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, data, opts)
		case *rbacv1.RoleBinding:
			kind, name = "RoleBinding", v.Namespace+"/"+v.Name
			_, err = cs.RbacV1().RoleBindings(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, data, opts)
		case *corev1.ServiceAccount:
			kind, name = "ServiceAccount", v.Namespace+"/"+v.Name
			_, err = cs.CoreV1().ServiceAccounts(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, data, opts)
		case *corev1.ConfigMap:
			kind, name = "ConfigMap", v.Namespace+"/"+v.Name
			_, err = cs.CoreV1().ConfigMaps(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, data, opts)
		case *appsv1.Deployment:
			kind, name = "Deployment", v.Namespace+"/"+v.Name
			_, err = cs.AppsV1().Deployments(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, data, opts)
		case *policyv1.PodDisruptionBudget:
			kind, name = "PodDisruptionBudget", v.Namespace+"/"+v.Name
			_, err = cs.PolicyV1().PodDisruptionBudgets(v.Namespace).Patch(ctx, v.Name, types.ApplyPatchType, data, opts)
		default:
			return fmt.Errorf("apply: unsupported object %T", o)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", kind, name, err)
		}
	}
	return nil
}
