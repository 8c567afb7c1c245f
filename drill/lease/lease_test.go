package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParseTarget(t *testing.T) {
	if got, err := ParseTarget("lease/kube-system/hactl-scheduler"); err != nil || got != (Target{"kube-system", "hactl-scheduler"}) {
		t.Fatalf("ParseTarget: %+v %v", got, err)
	}
	for _, bad := range []string{"", "lease", "lease/kube-system", "lease//x", "pod/kube-system/x", "lease/a/b/c", "lease/Kube_System/x", "lease/kube-system/Hactl Scheduler"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q): no error", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := func() *Options { return &Options{Method: MethodProcess, Count: 1, Rate: 5} }
	if err := ok().Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(o *Options)
		want   string
	}{
		"method":         {func(o *Options) { o.Method = "network" }, "--method network"},
		"count":          {func(o *Options) { o.Count = 0 }, "--count 0"},
		"rate":           {func(o *Options) { o.Rate = 51 }, "--pod-rate 51"},
		"negative rto":   {func(o *Options) { o.MaxRTO = -time.Second }, "--max-rto -1s"},
		"scheduler name": {func(o *Options) { o.SchedulerName = "Hactl_Scheduler" }, "--scheduler-name"},
		"pod image":      {func(o *Options) { o.PodImage = "https://registry.k8s.io/pause" }, "--pod-image"},
	} {
		o := ok()
		tc.mutate(o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.want)
		}
	}
}

func TestOverlaps(t *testing.T) {
	disjoint := []Window{{Identity: "a", FirstRev: 10, LastRev: 20}, {Identity: "b", FirstRev: 21, LastRev: 40}}
	if o := Overlaps(disjoint); len(o) != 0 {
		t.Fatalf("disjoint windows: %v", o)
	}
	interleaved := []Window{{Identity: "a", FirstRev: 10, LastRev: 30}, {Identity: "b", FirstRev: 25, LastRev: 40}}
	if o := Overlaps(interleaved); len(o) != 1 || !strings.Contains(o[0], "a (revisions 10-30) and b (25-40)") {
		t.Fatalf("interleaved windows: %v", o)
	}
}

// TestMeasure: the figures come from the observed events, the first binding after the fault is the
// first by another identity, and interleaved bindings of two identities fail the iteration.
func TestMeasure(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ob := &observer{created: map[string]time.Time{}, bound: map[string]binding{}, peak: 7}
	for i, b := range []binding{{at(-400), 100, "cp-a_1"}, {at(-200), 110, "cp-a_1"}, {at(30), 120, "cp-a_1"}, {at(1500), 130, "cp-b_2"}, {at(1600), 140, "cp-b_2"}} {
		name := string(rune('a' + i))
		ob.created[name], ob.bound[name] = b.at, b
	}
	o := &Options{SchedulerName: "hactl-scheduler"}
	var it Iteration
	takeover := 1200.0
	it.TakeoverMs = &takeover
	o.measure(&it, ob, t0)
	if it.FirstBindMs == nil || *it.FirstBindMs != 1500 || it.LongestGapMs == nil || *it.LongestGapMs != 1470 || it.PendingPeak != 7 || it.PodsBound != 5 {
		t.Fatalf("measure: first bind %v, gap %v, peak %d, bound %d", fmtMs(it.FirstBindMs), fmtMs(it.LongestGapMs), it.PendingPeak, it.PodsBound)
	}
	if len(it.Overlaps) != 0 || !strings.HasPrefix(it.Proof, "held: 2 identities") || len(it.failures(30*time.Second)) != 0 {
		t.Fatalf("proof %q overlaps %v failures %v", it.Proof, it.Overlaps, it.failures(30*time.Second))
	}
	ob.bound["f"] = binding{at(1700), 135, "cp-a_1"} // cp-a binds again between cp-b's bindings
	ob.created["f"] = at(1700)
	it = Iteration{TakeoverMs: &takeover}
	o.measure(&it, ob, t0)
	if len(it.Overlaps) != 1 || len(it.failures(30*time.Second)) != 1 {
		t.Fatalf("interleaved: overlaps %v failures %v", it.Overlaps, it.failures(30*time.Second))
	}
	slow := 31000.0
	it = Iteration{TakeoverMs: &slow, PodsCreated: 3, PodsBound: 2}
	if f := it.failures(30 * time.Second); len(f) != 2 {
		t.Fatalf("over budget and a pod unbound: %v", f)
	}
}

// TestUnboundNamesTheCause: a pod created but never bound is named in the failure with its
// PodScheduled condition as the API server has it (the scheduler's reason), a pod without one as
// not scheduled yet; bound pods are not listed.
func TestUnboundNamesTheCause(t *testing.T) {
	cs := fake.NewSimpleClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "drill-x-1", Namespace: Namespace},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: "Unschedulable", Message: "0/6 nodes are available"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "drill-x-2", Namespace: Namespace}},
	)
	now := time.Now()
	ob := &observer{created: map[string]time.Time{"drill-x-0": now, "drill-x-1": now, "drill-x-2": now, "drill-x-3": now},
		bound: map[string]binding{"drill-x-0": {at: now}}}
	o := &Options{API: cs, SchedulerName: "hactl-scheduler"}
	got := o.unbound(context.Background(), ob)
	want := []string{"drill-x-1: Unschedulable: 0/6 nodes are available", "drill-x-2: not scheduled yet", "drill-x-3: get: "}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || !strings.HasPrefix(got[2], want[2]) {
		t.Fatalf("unbound = %q, want %q", got, want)
	}
	it := Iteration{TakeoverMs: new(float64), PodsCreated: 4, PodsBound: 1, Unbound: got}
	if f := it.failures(30 * time.Second); len(f) != 1 || !strings.Contains(f[0], "3 of 4 pods never bound (drill-x-1: Unschedulable: 0/6 nodes are available; ") {
		t.Fatalf("failures = %q", f)
	}
}
