package membership

import (
	"errors"
	"strings"
	"testing"
)

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := Quorum(n); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestCheckRemoval(t *testing.T) {
	three := func(healthy ...bool) []Voter {
		return []Voter{{Name: "cp-a", ID: 1, Healthy: healthy[0]}, {Name: "cp-b", ID: 2, Healthy: healthy[1]}, {Name: "cp-c", ID: 3, Healthy: healthy[2]}}
	}
	for name, tc := range map[string]struct {
		members []Voter
		id      uint64
		want    string // empty: allowed
	}{
		"healthy follower of 3":          {three(true, true, true), 3, ""},
		"dead member of 3":               {three(true, true, false), 3, ""},
		"healthy one while another dead": {three(true, false, true), 3, "removing cp-c leaves 2 voting member(s), of which 1 healthy (cp-a); a quorum of 2 voters is 2 (⌊2/2⌋+1)"},
		"learner while others dead":      {append(three(true, false, false), Voter{Name: "cp-d", ID: 4, Learner: true}), 4, ""},
		"the only voter":                 {[]Voter{{Name: "cp-a", ID: 1, Healthy: true}}, 1, "only voting member"},
		"5 with one dead":                {[]Voter{{Name: "a", ID: 1, Healthy: true}, {Name: "b", ID: 2, Healthy: true}, {Name: "c", ID: 3, Healthy: true}, {Name: "d", ID: 4}, {Name: "e", ID: 5, Healthy: true}}, 5, ""},
		"5 with two dead":                {[]Voter{{Name: "a", ID: 1, Healthy: true}, {Name: "b", ID: 2, Healthy: true}, {Name: "c", ID: 3}, {Name: "d", ID: 4}, {Name: "e", ID: 5, Healthy: true}}, 5, "of which 2 healthy (a, b); a quorum of 4 voters is 3"},
		"a learner is no vote":           {[]Voter{{Name: "a", ID: 1, Healthy: true}, {Name: "b", ID: 2, Learner: true, Healthy: true}, {Name: "c", ID: 3, Healthy: true}}, 3, ""},
	} {
		err := CheckRemoval(tc.members, tc.id)
		var qe *QuorumError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", name, err)
		case tc.want != "" && (!errors.As(err, &qe) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a QuorumError containing %q", name, err, tc.want)
		}
	}
	if err := CheckRemoval(three(true, true, true), 9); err == nil || !strings.Contains(err.Error(), "no member with ID 9") {
		t.Errorf("unknown ID: %v", err)
	}
}
