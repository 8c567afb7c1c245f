package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func slotEvent(name, regarding, reason, note, by string, at time.Time, series int32) *eventsv1.Event {
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hactl-system"},
		EventTime:  metav1.NewMicroTime(at), Reason: reason, Note: note, ReportingInstance: by,
		Regarding: corev1.ObjectReference{Kind: "EtcdCluster", Namespace: "hactl-system", Name: regarding},
	}
	if series > 0 {
		ev.Series = &eventsv1.EventSeries{Count: series, LastObservedTime: metav1.NewMicroTime(at)}
	}
	return ev
}

// TestCheckSlots: the slots from the fault's to the takeover's are counted from the Events' notes —
// the old leader's action before the fault counts, a second action is a double, a slot without any
// is skipped; other reasons, other objects and other slots are not counted.
func TestCheckSlots(t *testing.T) {
	every := time.Minute
	slotOf := func(t time.Time) string { return t.Truncate(every).UTC().Format("20060102T1504Z") }
	t0 := time.Now().Add(-2 * time.Minute).Truncate(every).Add(50 * time.Second) // 10 s before a slot ends
	takeover := t0.Add(20 * time.Second)                                         // in the next slot
	s1, s2 := slotOf(t0), slotOf(takeover)
	cs := fake.NewClientset(
		slotEvent("a", "lab3", "SnapshotTaken", "slot "+s1+": member cp-a at revision 9", "op-1", t0.Add(-40*time.Second), 0),
		slotEvent("b", "lab3", "SnapshotTaken", "slot "+s2+": member cp-b at revision 12", "op-2", takeover.Add(time.Second), 0),
		slotEvent("c", "lab3", "SnapshotTaken", "slot "+s2+": member cp-b at revision 13", "op-1", takeover.Add(2*time.Second), 0),
		slotEvent("d", "lab3", "SnapshotFailed", "slot "+s1+": refused", "op-2", t0, 0),
		slotEvent("e", "other", "SnapshotTaken", "slot "+s1+": member x", "op-2", t0, 0),
		slotEvent("f", "lab3", "SnapshotTaken", "slot 20000101T0000Z: old", "op-2", t0, 0),
	)
	c := &SlotCheck{Namespace: "hactl-system", Regarding: "lab3", Reason: "SnapshotTaken", Every: every, SlotOf: slotOf}
	got, err := c.checkSlots(context.Background(), &Options{API: cs}, t0, takeover, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Slot != s1 || got[0].Actions != 1 || got[1].Slot != s2 || got[1].Actions != 2 || strings.Join(got[1].By, ",") != "op-2,op-1" {
		t.Fatalf("slots %+v, want %s once and %s twice (op-2, op-1)", got, s1, s2)
	}
	f := slotFailures(got)
	if len(f) != 1 || !strings.Contains(f[0], "slot "+s2+" acted on 2 times (by op-2, op-1)") {
		t.Errorf("failures %q, want the double of %s", f, s2)
	}

	// An Event series counts as its count; a slot with no action is skipped (the wait ends at the timeout).
	cs = fake.NewClientset(slotEvent("a", "lab3", "SnapshotTaken", "slot "+s1+": member cp-a", "op-1", t0, 2))
	if got, err = c.checkSlots(context.Background(), &Options{API: cs}, t0, takeover, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	f = slotFailures(got)
	if len(f) != 2 || !strings.Contains(f[0], "acted on 2 times") || !strings.Contains(f[1], "slot "+s2+" skipped") {
		t.Errorf("failures %q, want %s doubled (a series of 2) and %s skipped", f, s1, s2)
	}
}
