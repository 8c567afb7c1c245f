package kubesched

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestWaitReadyStuck: a replica of the new configuration that kubelet cannot start (its image cannot
// be pulled) ends the wait with kubelet's reason (at the deadline the error would be the count of
// Ready replicas instead).
func TestWaitReadyStuck(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hactl-scheduler-abc", Namespace: "kube-system",
			Labels: labels(), Annotations: map[string]string{ConfigHashAnnotation: "new"}},
		Spec: corev1.PodSpec{NodeName: "cp-a"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "hactl-scheduler",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "x:1"`}}}}},
	}
	s := v1alpha1.DefaultScheduler(&v1alpha1.Scheduler{})
	_, err := WaitReady(context.Background(), fake.NewClientset(pod), s, time.Minute, "new", 1)
	if err == nil || !strings.Contains(err.Error(), "ImagePullBackOff") || !strings.Contains(err.Error(), "hactl-scheduler-abc on cp-a") {
		t.Fatalf("WaitReady: %v, want the replica's ImagePullBackOff", err)
	}
}

// TestWaitReadyDeadline: at the deadline the error names each pod's configuration and readiness, so
// a wait that ran out says which replica lagged.
func TestWaitReadyDeadline(t *testing.T) {
	pod := func(name, node, config string, ready corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels(),
				Annotations: map[string]string{ConfigHashAnnotation: config}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
	}
	cs := fake.NewClientset(pod("s-a", "cp-a", "new", corev1.ConditionTrue), pod("s-b", "cp-b", "old", corev1.ConditionTrue),
		pod("s-c", "cp-c", "new", corev1.ConditionFalse))
	s := v1alpha1.DefaultScheduler(&v1alpha1.Scheduler{})
	_, err := WaitReady(context.Background(), cs, s, 0, "new", 3)
	for _, want := range []string{"1 of 3", "s-a on cp-a: new configuration, Ready", "s-b on cp-b: old configuration, Ready", "s-c on cp-c: new configuration, not Ready"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WaitReady: %v, want %q in it", err, want)
		}
	}
}
