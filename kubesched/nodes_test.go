package kubesched

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeadm/images"
)

func node(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels["topology.kubernetes.io/zone"] = zone
	}
	n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture = "linux", "amd64"
	return n
}

func TestCheckNodesZones(t *testing.T) {
	sched := func(replicas int, zones ...string) *v1alpha1.Scheduler {
		s := &v1alpha1.Scheduler{Replicas: replicas}
		for _, z := range zones {
			s.PreferredZones = append(s.PreferredZones, v1alpha1.PreferredZone{Zone: z, Weight: 100})
		}
		return v1alpha1.DefaultScheduler(s)
	}
	kind := []*corev1.Node{node("kind-worker2", ""), node("kind-control-plane", ""), node("kind-worker", "")}
	for _, tc := range []struct {
		name      string
		nodes     []*corev1.Node
		s         *v1alpha1.Scheduler
		warn      string // "" = no warning
		errWant   string // "" = no error
		platforms []images.Platform
	}{
		{"no zone label at all: warned, not refused", kind, sched(1, "az-a"),
			"3 node(s) without the label topology.kubernetes.io/zone: kind-control-plane, kind-worker, kind-worker2 (no node has a zone, so the zone preference has no effect", "", nil},
		{"some unlabelled", []*corev1.Node{node("w-a", "az-a"), node("w-x", "")}, sched(1, "az-a"),
			"1 node(s) without the label topology.kubernetes.io/zone: w-x (ZonePreference scores them 0", "", nil},
		{"no preference: nothing to warn about", kind, sched(1), "", "", nil},
		{"a zone no node has among others: refused", []*corev1.Node{node("w-a", "az-a")}, sched(1, "az-b"), "", "no node has topology.kubernetes.io/zone=az-b (zones: az-a)", nil},
		{"too many replicas", []*corev1.Node{node("w-a", "az-a")}, sched(2, "az-a"), "", "set at most 1", nil},
		{"an image for another architecture", []*corev1.Node{node("w-a", "az-a"), node("w-b", "az-b")}, sched(1), "",
			"the image is for linux/arm64 only; these nodes cannot run it: w-a (linux/amd64), w-b (linux/amd64)", []images.Platform{{OS: "linux", Architecture: "arm64"}}},
		{"an image for the nodes' architecture", []*corev1.Node{node("w-a", "az-a")}, sched(1), "", "",
			[]images.Platform{{OS: "linux", Architecture: "arm64"}, {OS: "linux", Architecture: "amd64"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tc.nodes {
				objs = append(objs, n)
			}
			warnings, err := checkNodes(context.Background(), fake.NewClientset(objs...), tc.s, "spec.scheduler", tc.platforms)
			if got := strings.Join(warnings, "\n"); tc.warn == "" && got != "" || !strings.Contains(got, tc.warn) {
				t.Errorf("warnings %q, want %q", got, tc.warn)
			}
			var ue *UsageError
			if tc.errWant == "" && err != nil || tc.errWant != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.errWant)) {
				t.Errorf("err %v, want %q", err, tc.errWant)
			}
		})
	}
}
