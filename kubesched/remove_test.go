package kubesched

import (
	"context"
	"strings"
	"testing"
	"time"

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

// TestWaitStaticGone: the Lease is deleted only once kubelet has stopped every static pod (their
// mirror pods gone); a static pod that stays is named with its node, and a pod of the Deployment
// mode (no mirror annotation) is not waited for.
func TestWaitStaticGone(t *testing.T) {
	mirror := func(node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: controlPlaneNS, Name: User + "-" + node, Labels: labels(),
			Annotations: map[string]string{mirrorAnnotation: "0a1b"}}, Spec: corev1.PodSpec{NodeName: node}}
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: controlPlaneNS, Name: User + "-5d9f-x", Labels: labels()}}
	ctx := context.Background()

	cs := fake.NewClientset(mirror("cp-a"), mirror("cp-b"), other)
	err := waitStaticGone(ctx, cs, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still runs on cp-a, cp-b") || !strings.Contains(err.Error(), "its Lease and RBAC stay") {
		t.Errorf("static pods left: %v", err)
	}

	// kubelet stops them a moment later: the wait ends then.
	go func() {
		time.Sleep(1200 * time.Millisecond)
		for _, n := range []string{"cp-a", "cp-b"} {
			_ = cs.CoreV1().Pods(controlPlaneNS).Delete(ctx, User+"-"+n, metav1.DeleteOptions{})
		}
	}()
	start := time.Now()
	if err := waitStaticGone(ctx, cs, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("returned after %s, before the static pods were gone", d)
	}
}
