package maintenanceguard

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hactl/hactl/scheduler/apis/config"
)

const label = "hactl.io/maintenance"

func guard(t *testing.T) *MaintenanceGuard {
	t.Helper()
	pl, err := New(context.Background(), &config.MaintenanceGuardArgs{Label: label}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*MaintenanceGuard)
}

func nodeInfo(n *v1.Node) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	return ni
}

func TestFilter(t *testing.T) {
	g := guard(t)
	marked := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-b", Labels: map[string]string{label: "true"},
		Annotations: map[string]string{SinceAnnotation: "2026-12-02T07:00:00Z", ReasonAnnotation: "kernel upgrade"}}}
	free := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-a"}}
	pod := &v1.Pod{}

	if st := g.Filter(context.Background(), nil, pod, nodeInfo(free)); !st.IsSuccess() {
		t.Fatalf("unmarked node filtered: %v", st)
	}
	st := g.Filter(context.Background(), nil, pod, nodeInfo(marked))
	if st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("marked node: code %v, want UnschedulableAndUnresolvable", st.Code())
	}
	if want := "node w-b is under maintenance (hactl.io/maintenance since 2026-12-02T07:00:00Z: kernel upgrade)"; st.Message() != want {
		t.Fatalf("reason %q, want %q", st.Message(), want)
	}
	tolerating := &v1.Pod{Spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: label, Operator: v1.TolerationOpExists}}}}
	if st := g.Filter(context.Background(), nil, tolerating, nodeInfo(marked)); !st.IsSuccess() {
		t.Fatalf("tolerating pod filtered: %v", st)
	}
	wrongValue := &v1.Pod{Spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: label, Operator: v1.TolerationOpEqual, Value: "false"}}}}
	if st := g.Filter(context.Background(), nil, wrongValue, nodeInfo(marked)); st.IsSuccess() {
		t.Fatal("a toleration of another value let the pod through")
	}
}

func TestQueueingHint(t *testing.T) {
	g := guard(t)
	old := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-b", Labels: map[string]string{label: "true"}}}
	cleared := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-b"}}
	if h, err := g.afterNodeChange(klog.Background(), &v1.Pod{}, old, cleared); err != nil || h != fwk.Queue {
		t.Fatalf("mark cleared: %v %v, want Queue", h, err)
	}
	if h, err := g.afterNodeChange(klog.Background(), &v1.Pod{}, cleared, old); err != nil || h != fwk.QueueSkip {
		t.Fatalf("mark set: %v %v, want QueueSkip", h, err)
	}
}

func TestNewRejectsBadLabel(t *testing.T) {
	if _, err := New(context.Background(), &config.MaintenanceGuardArgs{Label: "not a label"}, nil); err == nil {
		t.Fatal("no error for an invalid label")
	}
}
