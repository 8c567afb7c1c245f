package vrrp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/limits"
)

func nodes(prios ...int) []Node {
	out := make([]Node, len(prios))
	for i, p := range prios {
		out[i] = Node{Name: fmt.Sprintf("lb-%c", 'a'+i), Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(21 + i)}), Priority: p}
	}
	return out
}

func TestDefaultPriorities(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{0, nil},
		{1, []int{150}},
		{2, []int{150, 140}},
		{3, []int{150, 140, 130}},
		{15, []int{150, 140, 130, 120, 110, 100, 90, 80, 70, 60, 50, 40, 30, 20, 10}},
		{254, nil},
	} {
		if got := DefaultPriorities(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("DefaultPriorities(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	p := DefaultPriorities(16)
	if p[0] != 254 || p[15] != 239 {
		t.Errorf("DefaultPriorities(16) = %v, want 254..239", p)
	}
	p = DefaultPriorities(253)
	if p[0] != 254 || p[252] != 2 {
		t.Errorf("DefaultPriorities(253) runs %d..%d, want 254..2", p[0], p[252])
	}
}

func TestWeight(t *testing.T) {
	for _, tc := range []struct {
		prios   []int
		want    int
		wantErr string
	}{
		{[]int{150, 140}, -20, ""},
		{[]int{150, 140, 130}, -30, ""},
		{[]int{100}, -10, ""},
		{[]int{200, 10, 100}, -200, ""},
		{[]int{254, 2}, -253, ""},
		{[]int{255, 2}, 0, "are 253 apart"},
		{[]int{150, 1}, 0, "include 1: a failed node never drops below it"},
		{nil, 0, "no priorities"},
	} {
		got, err := Weight(tc.prios)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Weight(%v) = %d, %v; want an error with %q", tc.prios, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Weight(%v) = %d, %v; want %d", tc.prios, got, err, tc.want)
		}
	}
}

func TestEffective(t *testing.T) {
	for _, tc := range []struct {
		p, w    int
		healthy bool
		want    int
		running bool
	}{
		{150, -20, true, 150, true},
		{150, -20, false, 130, true},
		{150, 20, true, 170, true},
		{150, 20, false, 150, true},
		{150, 0, true, 150, true},
		{150, 0, false, 0, false},
		{10, -20, false, 1, true},    // bounded below by 1
		{250, 20, true, 254, true},   // bounded above by 254
		{254, -253, false, 1, true},  // 1 at least
		{1, 253, true, 254, true},    // 254 at most
		{100, -253, true, 100, true}, // a passing check changes nothing with a negative weight
	} {
		got, running := Effective(tc.p, tc.w, tc.healthy)
		if got != tc.want || running != tc.running {
			t.Errorf("Effective(%d, %d, %v) = %d, %v; want %d, %v", tc.p, tc.w, tc.healthy, got, running, tc.want, tc.running)
		}
	}
}

func TestElect(t *testing.T) {
	none := func(int) bool { return false }
	ns := nodes(150, 140, 130)
	if got := Elect(ns, -30, none); got != 0 {
		t.Errorf("all healthy: winner %d, want 0", got)
	}
	if got := Elect(ns, -30, func(i int) bool { return i == 0 }); got != 1 {
		t.Errorf("lb-a failed: winner %d, want 1", got)
	}
	if got := Elect(ns, -30, func(i int) bool { return i < 2 }); got != 2 {
		t.Errorf("lb-a and lb-b failed: winner %d, want 2 (the only healthy node)", got)
	}
	if got := Elect(ns, -30, func(int) bool { return true }); got != 0 {
		t.Errorf("all failed: winner %d, want 0 (everyone dropped alike)", got)
	}
	if got := Elect(ns, 0, func(int) bool { return true }); got != -1 {
		t.Errorf("all in FAULT: winner %d, want -1", got)
	}
	// Equal priorities: the higher primary address wins (RFC 5798 6.4.3), IPv6 too.
	tie := nodes(100, 100)
	if got := Elect(tie, -10, none); got != 1 {
		t.Errorf("tie: winner %d, want 1 (10.0.0.22 > 10.0.0.21)", got)
	}
	tie[0].Addr, tie[1].Addr = netip.MustParseAddr("fd00::10"), netip.MustParseAddr("fd00::9")
	if got := Elect(tie, -10, none); got != 0 {
		t.Errorf("IPv6 tie: winner %d, want 0 (fd00::10 > fd00::9)", got)
	}
}

func TestProveFailover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   []Node
		weight  int
		wantErr []string // substrings; nil = proof passes
	}{
		{"defaults, 2 nodes", nodes(150, 140), -20, nil},
		{"defaults, 3 nodes", nodes(150, 140, 130), -30, nil},
		{"minimal weight", nodes(150, 140), -11, nil},
		{"weight 0: FAULT releases the VIP", nodes(150, 140, 130), 0, nil},
		{"positive weight large enough", nodes(150, 140), 20, nil},
		{"positive weight bounded at 254 still moves", nodes(250, 240), 20, nil},
		{"lowest priority 1 with more nodes", nodes(200, 100, 1), -209, nil},
		{"weight too small", nodes(150, 140), -5, []string{
			"the VIP cannot move: when the check on lb-a fails it still advertises 145, above lb-b's 140",
			"priorities lb-a=150, lb-b=140, check weight -5",
			"more than 10 (highest - lowest priority) off a failed node: use -20"}},
		{"weight only reaches the next node", nodes(150, 140, 130), -15, []string{
			"when the check on lb-a fails it still advertises 135, above lb-c's 130, so when lb-c is the only node whose check passes the VIP stays on a node whose check failed",
			"lb-a=150, lb-b=140, lb-c=130", "check weight -15", "use -30"}},
		{"positive weight too small", nodes(150, 140), 5, []string{"advertises 150, above lb-b's 145", "check weight 5"}},
		{"tie lost on the address", nodes(140, 150), -10, []string{
			"when the check on lb-b fails it advertises 140, the same as lb-a, and wins the tie with the higher address (10.0.0.22 > 10.0.0.21)"}},
		{"bounded at 1 ties with priority 1", nodes(1, 254), -253, []string{"when the check on lb-b fails it advertises 1, the same as lb-a", "no weight can fix this: priorities 1, 254 include 1"}},
		{"one node", nodes(150), -10, []string{"1 node(s), a VIP needs at least 2"}},
		{"weight out of range", nodes(150, 140), -254, []string{"outside -253..253"}},
		{"priority out of range", nodes(255, 140), -200, []string{"priority 255 of lb-a is outside 1..254"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ProveFailover(tc.nodes, tc.weight)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("ProveFailover: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("ProveFailover passed, want a refusal")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
		})
	}

	var fe *FailoverError
	if err := ProveFailover(nodes(150, 140), -5); !errors.As(err, &fe) || fe.Failed != 0 || fe.Healthy != 1 || fe.Weight != -5 {
		t.Errorf("FailoverError = %+v", fe)
	}
}

// TestComputedWeightAlwaysFailsOver: for default priorities of every size and for random distinct
// priorities, the computed weight passes the proof, and even with several checks failing at once a
// healthy node always wins.
func TestComputedWeightAlwaysFailsOver(t *testing.T) {
	check := func(prios []int) {
		t.Helper()
		w, err := Weight(prios)
		if err != nil {
			if slices.Max(prios)-slices.Min(prios) < limits.MaxCheckWeight && slices.Min(prios) > limits.MinVRRPPriority {
				t.Fatalf("Weight(%v): %v", prios, err)
			}
			return
		}
		ns := nodes(prios...)
		if err := ProveFailover(ns, w); err != nil {
			t.Fatalf("priorities %v, weight %d: %v", prios, w, err)
		}
		for mask := 1; mask < 1<<len(ns)-1 && len(ns) <= 8; mask++ {
			failed := func(i int) bool { return mask&(1<<i) != 0 }
			if win := Elect(ns, w, failed); failed(win) {
				t.Fatalf("priorities %v, weight %d, failed mask %b: failed node %d wins", prios, w, mask, win)
			}
		}
	}
	for n := 2; n <= 30; n++ {
		check(DefaultPriorities(n))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 2 + r.IntN(6)
		prios := r.Perm(limits.MaxVRRPPriority)[:n]
		for i := range prios {
			prios[i]++
		}
		check(prios)
	}
}
