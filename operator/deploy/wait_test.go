package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A pod stuck in ContainerCreating: the summary says what it waits on (the newest Warning event).
func TestPodsSummaryNamesTheNewestWarning(t *testing.T) {
	now := time.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hactl-operator-x", Namespace: "hactl-system", Labels: map[string]string{"app.kubernetes.io/name": Name}},
		Spec:       corev1.PodSpec{NodeName: "w-a"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "operator", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}}},
	}
	ev := func(name, reason, msg string, at time.Time) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "hactl-system"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod.Name, Namespace: "hactl-system"},
			Type:           corev1.EventTypeWarning, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(at),
		}
	}
	cs := fake.NewSimpleClientset(pod,
		ev("a", "FailedMount", "old news", now.Add(-time.Minute)),
		ev("b", "FailedCreatePodSandBox", "failed to mount tmpfs: permission denied", now))
	got := podsSummary(context.Background(), cs, "hactl-system")
	for _, want := range []string{"hactl-operator-x on w-a: Pending", "ContainerCreating", "(event FailedCreatePodSandBox: failed to mount tmpfs: permission denied)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old news") {
		t.Errorf("summary names an older event:\n%s", got)
	}
}
