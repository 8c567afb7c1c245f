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
