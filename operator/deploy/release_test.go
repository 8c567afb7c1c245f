package deploy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func snapshotObject(t *testing.T, ns, name, key string, deleting bool, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	s := &hactlv1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
		Spec:       hactlv1.EtcdSnapshotSpec{ClusterName: "lab", Key: key, DeletionPolicy: hactlv1.DeletionRetain},
	}
	if deleting {
		s.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
	}
	u, err := toUnstructured(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestReleaseSnapshots: after operator remove, the EtcdSnapshots left carry no finalizer only the
// operator removes (a user's own stays), one being deleted is reported with its key, other
// namespaces are not touched, and a second run finds nothing to do.
func TestReleaseSnapshots(t *testing.T) {
	ns := DefaultNamespace
	dyn := dynfake.NewSimpleDynamicClient(runtime.NewScheme(),
		snapshotObject(t, ns, "lab-a", "20261207T090000Z-slot", false, SnapshotFinalizer),
		snapshotObject(t, ns, "lab-b", "20261207T091000Z-slot", false, "example.com/mine", SnapshotFinalizer),
		snapshotObject(t, ns, "lab-c", "20261207T092000Z-slot", true, SnapshotFinalizer, "example.com/mine"),
		snapshotObject(t, ns, "lab-d", "20261207T093000Z-slot", false),
		snapshotObject(t, "elsewhere", "lab-e", "20261207T094000Z-slot", false, SnapshotFinalizer),
	)
	ctx := context.Background()
	got, err := ReleaseSnapshots(ctx, dyn, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != "EtcdSnapshot" || got[0].Name != ns+"/lab-c" || !strings.Contains(got[0].Note, "20261207T092000Z-slot stays in the bucket") ||
		got[1].Kind != "EtcdSnapshots" || got[1].Name != ns || !strings.HasPrefix(got[1].Note, "2 kept without their finalizer "+SnapshotFinalizer) {
		t.Errorf("reported %+v", got)
	}
	ri := dyn.Resource(hactlv1.GroupVersion.WithResource("etcdsnapshots"))
	for name, want := range map[string][]string{"lab-a": nil, "lab-b": {"example.com/mine"}, "lab-c": {"example.com/mine"}, "lab-d": nil} {
		u, err := ri.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Errorf("%s: deleted (released only, never deleted)", name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if fs := u.GetFinalizers(); !slices.Equal(fs, want) {
			t.Errorf("%s: finalizers %v, want %v", name, fs, want)
		}
	}
	if u, err := ri.Namespace("elsewhere").Get(ctx, "lab-e", metav1.GetOptions{}); err != nil || !slices.Equal(u.GetFinalizers(), []string{SnapshotFinalizer}) {
		t.Errorf("another namespace's EtcdSnapshot was touched: %v %v", u.GetFinalizers(), err)
	}
	if again, err := ReleaseSnapshots(ctx, dyn, ns); err != nil || len(again) != 0 {
		t.Errorf("second run: %+v, %v", again, err)
	}
}

// TestReleaseSnapshotsNoCRD: without the CRD (removed with --purge, or never installed) there is
// nothing to release and no error; any other listing error is returned.
func TestReleaseSnapshotsNoCRD(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierrors.NewNotFound(hactlv1.GroupVersion.WithResource("etcdsnapshots").GroupResource(), ""), ""},
		{apierrors.NewForbidden(hactlv1.GroupVersion.WithResource("etcdsnapshots").GroupResource(), "", nil), "list EtcdSnapshots in hactl-system: "},
	} {
		dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{hactlv1.GroupVersion.WithResource("etcdsnapshots"): "EtcdSnapshotList"})
		dyn.PrependReactor("list", "etcdsnapshots", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
		got, err := ReleaseSnapshots(context.Background(), dyn, DefaultNamespace)
		if len(got) != 0 || (tc.want == "") != (err == nil) || err != nil && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %+v, %v", tc.err, got, err)
		}
	}
}
