package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// SlotCheck proves that a leader-elected component acted once per slot across the takeover: no
// slot done twice (by the old and the new leader) and none skipped. hactl-operator records each
// scheduled snapshot as an Event regarding its EtcdCluster (reason SnapshotTaken, note
// "slot SLOT: …"); the drill counts those Events per slot.
type SlotCheck struct {
	// Namespace and Regarding name the object the Events are about (the EtcdCluster).
	Namespace, Regarding string
	// Reason is the Event reason of one action.
	Reason string
	// Every is the slot length; SlotOf names the slot a time falls in.
	Every  time.Duration
	SlotOf func(time.Time) string
}

// SlotActions is one slot and the actions recorded for it: want exactly one.
type SlotActions struct {
	// Object is NAMESPACE/NAME of the Events' object.
	Object  string `json:"object"`
	Slot    string `json:"slot"`
	Actions int    `json:"actions"`
	// By are the reporting instances (the replicas' pods) of the actions, in the order recorded.
	By []string `json:"by,omitempty"`
}

// settle is how long after the takeover a second action for a slot is still looked for: the new
// leader acts on its first reconcile, within a second or two of taking the Lease.
const settle = 10 * time.Second

// checkSlots waits, up to timeout, until every slot from the fault's (t0) to the takeover's has an
// action recorded and settle has passed since the takeover, then returns the count per slot. The
// Events are listed from the API server (their notes name the slot), so an action recorded by the
// old leader before the fault counts. Errors: listing the Events failed until the timeout.
func (c *SlotCheck) checkSlots(ctx context.Context, o *Options, t0, takeover time.Time, timeout time.Duration) ([]SlotActions, error) {
	var slots []string
	for t := t0; ; t = t.Add(c.Every) {
		if t.After(takeover) {
			t = takeover
		}
		if s := c.SlotOf(t); !slices.Contains(slots, s) {
			slots = append(slots, s)
		}
		if !t.Before(takeover) {
			break
		}
	}
	var out []SlotActions
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		evs, err := o.API.EventsV1().Events(c.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		out = c.count(evs.Items, slots)
		for _, s := range out {
			if s.Actions == 0 {
				return false, nil
			}
		}
		return time.Since(takeover) >= settle, nil
	})
	if err != nil && out == nil {
		return nil, fmt.Errorf("listing Events in %s: %w", c.Namespace, cmpErr(lastErr, err))
	}
	return out, nil
}

// count is the actions per slot of slots among evs: Events of c.Reason regarding c.Regarding whose
// note begins "slot SLOT:"; an Event series counts as its count.
func (c *SlotCheck) count(evs []eventsv1.Event, slots []string) []SlotActions {
	out := make([]SlotActions, len(slots))
	for i, s := range slots {
		out[i] = SlotActions{Object: c.Namespace + "/" + c.Regarding, Slot: s}
	}
	slices.SortFunc(evs, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	for _, ev := range evs {
		if ev.Reason != c.Reason || ev.Regarding.Name != c.Regarding {
			continue
		}
		rest, ok := strings.CutPrefix(ev.Note, "slot ")
		if !ok {
			continue
		}
		slot, _, _ := strings.Cut(rest, ":")
		i := slices.Index(slots, slot)
		if i < 0 {
			continue
		}
		n := 1
		if ev.Series != nil && ev.Series.Count > 1 {
			n = int(ev.Series.Count)
		}
		out[i].Actions += n
		for range n {
			out[i].By = append(out[i].By, ev.ReportingInstance)
		}
	}
	return out
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// slotFailures is what breaks the rule of one action per slot.
func slotFailures(ss []SlotActions) []string {
	var f []string
	for _, s := range ss {
		switch {
		case s.Actions == 0:
			f = append(f, fmt.Sprintf("%s: slot %s skipped (no action recorded)", s.Object, s.Slot))
		case s.Actions > 1:
			f = append(f, fmt.Sprintf("%s: slot %s acted on %d times (by %s): a double action", s.Object, s.Slot, s.Actions, strings.Join(s.By, ", ")))
		}
	}
	return f
}
