package kubesched

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRemoveThroughAPI: the Deployment, its ConfigMap and ServiceAccount, and the Lease its
// replicas held are gone; other Leases of kube-system stay; a second run finds nothing and is no
// error.
func TestRemoveThroughAPI(t *testing.T) {
	s := labScheduler(t, nil)
	le := s.LeaderElection
	ns := metav1.ObjectMeta{Namespace: controlPlaneNS}
	named := func(name string) metav1.ObjectMeta { m := ns; m.Name = name; return m }
	holder := "hactl-scheduler-5d9f_1b2c"
	cs := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: named(User)},
		&corev1.ConfigMap{ObjectMeta: named(configMapName)},
		&corev1.ServiceAccount{ObjectMeta: named(User)},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: le.ResourceNamespace, Name: le.ResourceName}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}},
		&coordinationv1.Lease{ObjectMeta: named("kube-scheduler")},
	)
	ctx := context.Background()
	for run := 1; run <= 2; run++ {
		if err := RemoveThroughAPI(ctx, cs, s); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	if _, err := cs.AppsV1().Deployments(controlPlaneNS).Get(ctx, User, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(controlPlaneNS).Get(ctx, configMapName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap: %v", err)
	}
	if _, err := cs.CoordinationV1().Leases(le.ResourceNamespace).Get(ctx, le.ResourceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Lease %s/%s: %v", le.ResourceNamespace, le.ResourceName, err)
	}
	if _, err := cs.CoordinationV1().Leases(controlPlaneNS).Get(ctx, "kube-scheduler", metav1.GetOptions{}); err != nil {
		t.Errorf("kube-scheduler's Lease: %v", err)
	}
}
