package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
)

// A replica stuck in ContainerCreating: the put back's progress and error say why.
func TestUnreadyNamesWhatAReplicaWaitsOn(t *testing.T) {
	lbl := map[string]string{"app.kubernetes.io/name": "hactl-operator"}
	ready := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "op-a", Namespace: "hactl-system", Labels: lbl}, Spec: corev1.PodSpec{NodeName: "w-a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	stuck := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "op-b", Namespace: "hactl-system", Labels: lbl}, Spec: corev1.PodSpec{NodeName: "w-b"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "operator",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "hactl-system"}, Type: corev1.EventTypeWarning,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "op-b"}, Reason: "FailedCreatePodSandBox",
		Message: `failed to get sandbox image "registry.k8s.io/pause:3.10.2"`, LastTimestamp: metav1.NewTime(time.Now())}
	o := &Options{API: fake.NewClientset(ready, stuck, ev)}
	got := o.unready(context.Background(), replicaState{ns: "hactl-system", selector: labels.SelectorFromSet(lbl)})
	for _, want := range []string{"pod op-b on w-b: Pending", "operator ContainerCreating", "FailedCreatePodSandBox", "pause:3.10.2"} {
		if !strings.Contains(got, want) {
			t.Errorf("unready lacks %q: %s", want, got)
		}
	}
	if strings.Contains(got, "op-a") {
		t.Errorf("unready names the Ready pod: %s", got)
	}
}
