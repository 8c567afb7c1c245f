package report

import (
	"slices"
	"testing"
)

func TestPending(t *testing.T) {
	c := Cluster{
		Members: []Member{{Name: "cp-a", Action: ActionUnchanged}, {Name: "cp-b", Action: ActionUpdate}},
		Hosts:   []Host{{Name: "lb-a", Action: "unchanged"}, {Name: "lb-b", Action: "changed"}},
	}
	if got, want := c.Pending(), []string{"member cp-b: update", "host lb-b: changed"}; !slices.Equal(got, want) {
		t.Fatalf("Pending() = %v, want %v", got, want)
	}
	c.Members[1].Action, c.Hosts[1].Action = ActionUnchanged, "unchanged"
	if got := c.Pending(); got != nil {
		t.Fatalf("converged: Pending() = %v, want nil", got)
	}
}
