package membership

import "testing"

func TestReplaceOrder(t *testing.T) {
	voters := func(healthy ...bool) []Voter {
		var out []Voter
		for i, h := range healthy {
			out = append(out, Voter{Name: string(rune('a' + i)), ID: uint64(i + 1), Healthy: h})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		members []Voter
		want    string
	}{
		// etcd's mayAddMember: the leader must be connected to a quorum of voters+1.
		{"3 healthy: 3 >= quorum(4)=3", voters(true, true, true), OrderAddFirst},
		{"3, one dead: 2 < quorum(4)=3", voters(true, true, false), OrderRemoveFirst},
		{"5, one dead: 4 >= quorum(6)=4", voters(true, true, true, true, false), OrderAddFirst},
		{"5, two dead: 3 < quorum(6)=4", voters(true, true, true, false, false), OrderRemoveFirst},
		{"a learner does not count", append(voters(true, true, false), Voter{Name: "l", ID: 9, Learner: true, Healthy: true}), OrderRemoveFirst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := ReplaceOrder(tc.members, 1)
			if got != tc.want || why == "" {
				t.Errorf("order %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}

func TestCheckNew(t *testing.T) {
	v := &view{members: []Voter{{Name: "a", ID: 1}}, peers: map[uint64][]string{1: {"https://10.0.0.1:2380"}}}
	for _, tc := range []struct {
		host, peer string
		refused    bool
	}{
		{"a", "https://10.0.0.9:2380", true},
		{"b", "https://10.0.0.1:2380", true},
		{"b", "https://10.0.0.1:2390", true}, // same address, another port: the same machine
		{"b", "https://10.0.0.2:2380", false},
	} {
		err := v.checkNew(tc.host, tc.peer)
		if (err != nil) != tc.refused {
			t.Errorf("checkNew(%s, %s) = %v, refused want %v", tc.host, tc.peer, err, tc.refused)
		}
		if ae, ok := err.(*AlreadyMemberError); err != nil && (!ok || ae.ExitCode() != 2) {
			t.Errorf("error %T is not an *AlreadyMemberError with exit 2", err)
		}
	}
}
