package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func fakeDeployed(healing *hactlv1.HealingStatus) *dynfake.FakeDynamicClient {
	ns := DefaultNamespace
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/managed-by": "hactl"}}
	}
	ec := &hactlv1.EtcdCluster{ObjectMeta: meta("lab")}
	ec.Status.Healing = healing
	return dynfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "secrets"}:               "SecretList",
		hactlv1.GroupVersion.WithResource("etcdsnapshots"): "EtcdSnapshotList",
	},
		&appsv1.Deployment{ObjectMeta: meta(Name)},
		&coordinationv1.Lease{ObjectMeta: meta(Name)},
		ec,
		&corev1.Secret{ObjectMeta: meta(ClientSecret)},
		&corev1.Secret{ObjectMeta: meta(SpareSecretPrefix + "spare-a")},
		&corev1.ServiceAccount{ObjectMeta: meta(Name)},
	)
}

// TestRemoveRefusesDuringHeal: a heal recorded in the EtcdCluster's status stops the removal
// before anything is deleted (only the operator finishes or rolls it back); the error names the
// member, the spare and the step.
func TestRemoveRefusesDuringHeal(t *testing.T) {
	dyn := fakeDeployed(&hactlv1.HealingStatus{Member: "cp-c", Spare: "spare-a", Step: hactlv1.HealStartingMember,
		StepAt: metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))})
	out, err := remove(context.Background(), dyn, "", "lab")
	var hip *HealInProgressError
	if !errors.As(err, &hip) || len(out) != 0 {
		t.Fatalf("removed %+v, error %v; want nothing and a *HealInProgressError", out, err)
	}
	for _, want := range []string{"member cp-c onto spare spare-a, step StartingMember since 2026-12-07T10:00:00Z", "nothing was removed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(DefaultNamespace).Get(context.Background(), Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Deployment was deleted: %v", err)
	}
}

// TestRemove: without a heal every object goes (the spares' Secrets found by their prefix), the
// Lease with them; a second run finds every one gone and is no error.
func TestRemove(t *testing.T) {
	dyn := fakeDeployed(nil)
	ctx := context.Background()
	out, err := remove(ctx, dyn, "", "lab")
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, r := range out {
		if !r.Gone {
			deleted[r.Kind+" "+r.Name] = true
		}
	}
	for _, want := range []string{"Deployment", "Lease", "ServiceAccount"} {
		if !deleted[want+" "+DefaultNamespace+"/"+Name] {
			t.Errorf("%s not deleted: %+v", want, out)
		}
	}
	if !deleted["EtcdCluster "+DefaultNamespace+"/lab"] || !deleted["Secret "+DefaultNamespace+"/"+SpareSecretPrefix+"spare-a"] || !deleted["Secret "+DefaultNamespace+"/"+ClientSecret] {
		t.Errorf("EtcdCluster or Secrets not deleted: %+v", out)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}).Namespace(DefaultNamespace).Get(ctx, Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Lease: %v", err)
	}
	again, err := remove(ctx, dyn, DefaultNamespace, "lab")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if !r.Gone {
			t.Errorf("second run: %+v not reported gone", r)
		}
	}
}

// TestRemoveHealBeganDuringRemoval: a heal the leader began while the Deployment was being
// deleted keeps the EtcdCluster (its record) and what follows it; the error says to deploy again.
func TestRemoveHealBeganDuringRemoval(t *testing.T) {
	dyn := fakeDeployed(nil)
	ecGVR := hactlv1.GroupVersion.WithResource("etcdclusters")
	dyn.PrependReactor("delete", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := dyn.Tracker().Get(ecGVR, DefaultNamespace, "lab")
		if err != nil {
			t.Error(err)
			return false, nil, nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Error(err)
			return false, nil, nil
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(hactlv1.GroupVersion.WithKind("EtcdCluster"))
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"member": "cp-c", "spare": "spare-a", "step": "AddingLearner", "order": "add-first"}, "status", "healing")
		if err := dyn.Tracker().Update(ecGVR, u, DefaultNamespace); err != nil {
			t.Error(err)
		}
		return false, nil, nil
	})
	out, err := remove(context.Background(), dyn, "", "lab")
	var hip *HealInProgressError
	if !errors.As(err, &hip) || !hip.DeploymentGone || !strings.Contains(err.Error(), "run hactl operator deploy") {
		t.Fatalf("error %v; want a *HealInProgressError after the Deployment", err)
	}
	if len(out) != 3 || out[0].Kind != "Deployment" || out[2].Kind != "PodDisruptionBudget" {
		t.Errorf("removed %+v; want the Deployment, Lease and PodDisruptionBudget only", out)
	}
	if _, err := dyn.Resource(ecGVR).Namespace(DefaultNamespace).Get(context.Background(), "lab", metav1.GetOptions{}); err != nil {
		t.Errorf("the EtcdCluster was deleted: %v", err)
	}
}

// TestCheckDrift: a heal cluster.yaml does not show yet refuses the removal (the EtcdCluster is its
// only record, the one bootstrap checks); with the spec edited as told, or without an EtcdCluster,
// nothing is refused.
func TestCheckDrift(t *testing.T) {
	c := testCluster(t, false) // etcd hosts cp-a, cp-b, cp-c
	c.Metadata.Name = "lab"
	healed := hactlv1.HealRecord{Member: "cp-c", Spare: "spare-c", Result: hactlv1.HealSucceeded,
		FinishedAt: metav1.NewTime(time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC))}
	ec := &hactlv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "lab"}}
	ec.Status.Heals = []hactlv1.HealRecord{healed}
	ctx := context.Background()
	err := checkDrift(ctx, dynfake.NewSimpleDynamicClient(scheme, ec), "", c)
	var de *DriftError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "cp-c was replaced by spare-c") {
		t.Errorf("a heal the spec does not show: %v, want a *DriftError naming it", err)
	}
	c.Spec.Hosts[2].Name = "spare-c" // edited as told
	if err := checkDrift(ctx, dynfake.NewSimpleDynamicClient(scheme, ec), "", c); err != nil {
		t.Errorf("the spec shows the heal: %v", err)
	}
	if err := checkDrift(ctx, dynfake.NewSimpleDynamicClient(scheme), "", c); err != nil {
		t.Errorf("no EtcdCluster: %v", err)
	}
}
