package lease

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// perPodLabels are labels that differ between the replicas of one workload: the ReplicaSet's
// template hash (a rollout) and the node's topology, which the API server copies onto a pod when it
// is bound (the PodTopologyLabelsAdmission plugin, KEP-4742).
var perPodLabels = []string{"pod-template-hash", corev1.LabelTopologyZone, corev1.LabelTopologyRegion}

// replicaSelector is the selector of p's siblings, the replicas counted Ready before and after the
// fault: the selector of the Deployment (or ReplicaSet, StatefulSet, DaemonSet) that controls p,
// read through its controller owner references; for a pod without one, or an owner that can't be
// read (e.g. RBAC without get on apps), p's labels minus perPodLabels. It never returns an error:
// the fallback is always there.
func replicaSelector(ctx context.Context, api kubernetes.Interface, p *corev1.Pod) labels.Selector {
	if sel := ownerSelector(ctx, api, p.Namespace, metav1.GetControllerOf(p)); sel != nil {
		return sel
	}
	set := labels.Set{}
	for k, v := range p.Labels {
		set[k] = v
	}
	for _, k := range perPodLabels {
		delete(set, k)
	}
	return labels.SelectorFromSet(set)
}

// ownerSelector follows ref (a ReplicaSet up to its Deployment) to the workload's spec.selector;
// nil when ref is nil, not an apps kind, not readable, or its selector does not parse.
func ownerSelector(ctx context.Context, api kubernetes.Interface, ns string, ref *metav1.OwnerReference) labels.Selector {
	if ref == nil {
		return nil
	}
	apps := api.AppsV1()
	var ls *metav1.LabelSelector
	switch ref.Kind {
	case "ReplicaSet":
		rs, err := apps.ReplicaSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		if sel := ownerSelector(ctx, api, ns, metav1.GetControllerOf(rs)); sel != nil {
			return sel
		}
		ls = rs.Spec.Selector
	case "Deployment":
		d, err := apps.Deployments(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		ls = d.Spec.Selector
	case "StatefulSet":
		s, err := apps.StatefulSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		ls = s.Spec.Selector
	case "DaemonSet":
		d, err := apps.DaemonSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		ls = d.Spec.Selector
	default:
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		return nil
	}
	return sel
}
