package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
)

// TestEtcdClusterReconciler runs the reconciler in a manager against a real kube-apiserver
// (envtest) and a real 3-member etcd with client-certificate auth: the EtcdCluster becomes
// Running with every member seen; a member killed makes it Degraded with QuorumAtRisk, its restart
// Running again, each transition an event; a second EtcdCluster of the same cluster ID is a
// Degraded duplicate; a Secret without the key leaves an EtcdCluster Pending with the reason.
func TestEtcdClusterReconciler(t *testing.T) {
	f := newFixture(t)
	c, ec, ctx := f.c, f.etcd, context.Background()
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "no-key", Namespace: "default"}, Data: map[string][]byte{SecretCA: f.secret[SecretCA], SecretCert: f.secret[SecretCert]}}))
	must(t, c.Create(ctx, f.cluster("main", f.id, "etcd-client")))
	f.start(t, func(mgr ctrl.Manager) error {
		return (&EtcdClusterReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hactl-operator"),
			RequeuePeriod: time.Second, DialTimeout: time.Second, RequestTimeout: 2 * time.Second}).SetupWithManager(mgr)
	})

	got := waitFor(t, c, "main", "Running with every member seen", func(s hactlv1.EtcdClusterStatus) bool {
		return s.Phase == hactlv1.PhaseRunning && s.Leader != "" && len(s.Members) == 3 && s.Members[0].Healthy && s.Members[0].ID != "" &&
			meta.IsStatusConditionTrue(s.Conditions, hactlv1.ConditionAvailable) && meta.IsStatusConditionFalse(s.Conditions, hactlv1.ConditionQuorumAtRisk)
	})
	if got.ObservedGeneration != 1 {
		t.Errorf("observedGeneration %d, want 1", got.ObservedGeneration)
	}

	victim := (ec.LeaderIndex(ctx) + 1) % 3
	ec.Kill(victim)
	got = waitFor(t, c, "main", "Degraded with QuorumAtRisk after a member was killed", func(s hactlv1.EtcdClusterStatus) bool {
		r := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionQuorumAtRisk)
		return s.Phase == hactlv1.PhaseDegraded && r != nil && r.Status == "True" && r.Reason == observe.ReasonOneFailureAway &&
			!s.Members[victim].Healthy && meta.IsStatusConditionTrue(s.Conditions, hactlv1.ConditionAvailable)
	})
	if d := meta.FindStatusCondition(got.Conditions, hactlv1.ConditionDegraded); d == nil || !strings.Contains(d.Message, ec.Members()[victim].Name) {
		t.Errorf("Degraded does not name the killed member %s: %+v", ec.Members()[victim].Name, d)
	}
	if err := ec.Restart(victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "main", "Running again after the restart", func(s hactlv1.EtcdClusterStatus) bool {
		return s.Phase == hactlv1.PhaseRunning && s.Members[victim].Healthy
	})

	// A second EtcdCluster for the same etcd cluster never acts: a Degraded duplicate.
	must(t, c.Create(ctx, f.cluster("copy", f.id, "etcd-client")))
	waitFor(t, c, "copy", "a Degraded duplicate", func(s hactlv1.EtcdClusterStatus) bool {
		d := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionDegraded)
		return s.Phase == hactlv1.PhaseDegraded && d != nil && d.Reason == observe.ReasonDuplicateCluster && strings.Contains(d.Message, "default/main")
	})
	// A Secret without tls.key: Pending, with the reason and the missing key named.
	must(t, c.Create(ctx, f.cluster("nokey", "beef", "no-key")))
	waitFor(t, c, "nokey", "Pending for want of the client key", func(s hactlv1.EtcdClusterStatus) bool {
		a := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionAvailable)
		return s.Phase == hactlv1.PhasePending && a != nil && a.Reason == observe.ReasonSecret && strings.Contains(a.Message, "tls.key")
	})

	// Every phase transition of main was an event.
	var evs eventsv1.EventList
	deadline := time.Now().Add(10 * time.Second)
	for {
		must(t, c.List(ctx, &evs, client.InNamespace("default")))
		reasons := map[string]int{}
		for _, e := range evs.Items {
			if e.Regarding.Name == "main" {
				reasons[e.Reason]++
			}
		}
		if reasons["PhaseRunning"] >= 2 && reasons["PhaseDegraded"] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events for main: %v; want PhaseRunning twice and PhaseDegraded", reasons)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitFor(t *testing.T, c client.Client, name, what string, ok func(hactlv1.EtcdClusterStatus) bool) hactlv1.EtcdClusterStatus {
	t.Helper()
	var e hactlv1.EtcdCluster
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &e); err == nil && ok(e.Status) {
			return e.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within 30s; status %s", name, what, fmt.Sprintf("%+v", e.Status))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
