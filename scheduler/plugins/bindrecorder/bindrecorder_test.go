package bindrecorder

import (
	"context"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

func TestBindRecordsIdentity(t *testing.T) {
	client := fake.NewClientset()
	var got *v1.Binding
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "binding" {
			got = a.(clienttesting.CreateAction).GetObject().(*v1.Binding)
			return true, got, nil
		}
		return false, nil, nil
	})
	h, err := frameworkruntime.NewFramework(context.Background(), nil, nil, frameworkruntime.WithClientSet(client))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(context.Background(), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	b := pl.(*RecordingBinder)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	if st := b.Bind(context.Background(), nil, pod, "w-a"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if got == nil {
		t.Fatal("no binding created")
	}
	host, _ := os.Hostname()
	id := got.Annotations[BoundByAnnotation]
	if id != b.Identity() || !strings.HasPrefix(id, host+"_") || got.Target.Name != "w-a" || got.UID != "u1" {
		t.Fatalf("binding %+v (identity %q), want target w-a, uid u1, %s = %s_…", got, b.Identity(), BoundByAnnotation, host)
	}
	other, _ := New(context.Background(), nil, h)
	if other.(*RecordingBinder).Identity() == id {
		t.Fatal("two instances share an identity")
	}
}
