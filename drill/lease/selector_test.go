package lease

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func controllerRef(kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: &yes}}
}

// TestReplicaSelector: the replicas of a Deployment are counted by its selector, whatever zone label
// the API server copied onto each pod at binding; without a readable owner, the pod's labels minus
// the per-pod ones.
func TestReplicaSelector(t *testing.T) {
	podLabels := map[string]string{"app.kubernetes.io/name": "op", "pod-template-hash": "abc", corev1.LabelTopologyZone: "az-c"}
	sibling := labels.Set{"app.kubernetes.io/name": "op", "pod-template-hash": "def", corev1.LabelTopologyZone: "az-a"}
	other := labels.Set{"app.kubernetes.io/name": "other", corev1.LabelTopologyZone: "az-c"}
	pod := func(owner []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op-abc-1", Labels: podLabels, OwnerReferences: owner}}
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "op"}}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op-abc", OwnerReferences: controllerRef("Deployment", "op")},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "op", "pod-template-hash": "abc"}}}}

	for _, c := range []struct {
		name    string
		objects []runtime.Object
		owner   []metav1.OwnerReference
		// matches are the label sets the selector must match; misses those it must not.
		matches, misses []labels.Set
	}{
		{"deployment", []runtime.Object{dep, rs}, controllerRef("ReplicaSet", "op-abc"), []labels.Set{sibling}, []labels.Set{other}},
		{"replicaset without its deployment", []runtime.Object{rs}, controllerRef("ReplicaSet", "op-abc"),
			[]labels.Set{{"app.kubernetes.io/name": "op", "pod-template-hash": "abc", corev1.LabelTopologyZone: "az-b"}}, []labels.Set{sibling, other}},
		{"no owner", nil, nil, []labels.Set{sibling}, []labels.Set{other}},
		{"owner not readable", nil, controllerRef("ReplicaSet", "gone"), []labels.Set{sibling}, []labels.Set{other}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewClientset(c.objects...)
			sel := replicaSelector(context.Background(), cs, pod(c.owner))
			for _, m := range c.matches {
				if !sel.Matches(m) {
					t.Errorf("selector %q does not match %v", sel, m)
				}
			}
			for _, m := range c.misses {
				if sel.Matches(m) {
					t.Errorf("selector %q matches %v", sel, m)
				}
			}
		})
	}
}
