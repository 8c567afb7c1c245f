package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/internal/etcdtest"
	"github.com/hactl/hactl/ui"
)

func TestCheckTopology(t *testing.T) {
	zones := map[string]string{"a1": "az-a", "a2": "az-a", "b1": "az-b", "b2": "az-b", "c1": "az-c"}
	for name, tc := range map[string]struct {
		names    []string
		accept   bool
		warnings []string // substrings, one per warning
		err      string
	}{
		"3 in 3 zones":              {names: []string{"a1", "b1", "c1"}},
		"5 in 3 zones, 2/2/1":       {names: []string{"a1", "a2", "b1", "b2", "c1"}},
		"3 with 2 in one zone":      {names: []string{"a1", "a2", "c1"}, err: `zone "az-a" holds 2 of the 3 voting members (a1, a2) and a quorum is 2 (⌊3/2⌋+1)`},
		"accepted zone quorum":      {names: []string{"a1", "a2", "c1"}, accept: true, warnings: []string{"accepted: spec.etcd.acceptZoneQuorumLoss"}},
		"4 is even: warning":        {names: []string{"a1", "b1", "b2", "c1"}, warnings: []string{"4 voting members are left: they tolerate 1 failure(s), as 3 would"}},
		"2 in 2 zones":              {names: []string{"a1", "b1"}, warnings: []string{"2 voting members"}},
		"2 in one zone":             {names: []string{"a1", "a2"}, warnings: []string{"2 voting members"}, err: `zone "az-a" holds 2 of the 2`},
		"1 left":                    {names: []string{"c1"}, warnings: []string{"NOT highly available"}},
		"unknown zones not counted": {names: []string{"x", "y", "a1"}},
	} {
		t.Run(name, func(t *testing.T) {
			warnings, err := CheckTopology(tc.names, zones, tc.accept)
			if tc.err == "" && err != nil {
				t.Fatalf("error %v", err)
			}
			if tc.err != "" {
				var ze *ZoneQuorumError
				if !errors.As(err, &ze) || !strings.Contains(err.Error(), tc.err) || ze.ExitCode() != 2 {
					t.Fatalf("error %v, want a ZoneQuorumError with %q", err, tc.err)
				}
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q, want %q", warnings[i], w)
				}
			}
		})
	}
}

// TestShrinkAgainstRealEtcd: on a real 5-member cluster, a shrink that would leave a zone holding a
// quorum, or that names a non-member, changes nothing; a dry run orders the removals with the
// leader last; 5→3 removes both, leader last, and the cluster keeps its data.
func TestShrinkAgainstRealEtcd(t *testing.T) {
	c := etcdtest.Start(t, 5)
	cl := Cluster{Endpoints: c.Endpoints(), TLS: c.Files()}
	p := ui.New(&strings.Builder{}, false, false)
	ctx := context.Background()
	if _, err := c.Client(t).Put(ctx, "before", "1"); err != nil {
		t.Fatal(err)
	}
	leaderIdx, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := fmt.Sprintf("m%d", leaderIdx)
	// The leader's zone is az-l; the other four are split over az-x and az-y, two each.
	zones := map[string]string{leader: "az-l"}
	var others []string
	for i := range 5 {
		if name := fmt.Sprintf("m%d", i); name != leader {
			others = append(others, name)
			zones[name] = []string{"az-x", "az-y"}[len(others)%2]
		}
	}
	byZone := func(z string) (out []string) {
		for _, n := range others {
			if zones[n] == z {
				out = append(out, n)
			}
		}
		return out
	}
	x, y := byZone("az-x"), byZone("az-y")

	for name, tc := range map[string]struct {
		names  []string
		target any
	}{
		"not a member":       {[]string{x[0], "nosuch"}, new(*NotMemberError)},
		"zone keeps quorum":  {[]string{x[0], x[1]}, new(*ZoneQuorumError)}, // leaves az-y with 2 of 3
		"named twice":        {[]string{x[0], x[0]}, nil},
		"the leader as well": {[]string{leader, x[0], x[1]}, new(*ZoneQuorumError)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Shrink(ctx, ShrinkOptions{Cluster: cl, Names: tc.names, Zones: zones, Printer: p, Host: &fakeRetirer{}})
			if err == nil || (tc.target != nil && !errors.As(err, tc.target)) {
				t.Fatalf("shrink %v: %v, want %T", tc.names, err, tc.target)
			}
			if n := len(memberNames(t, c)); n != 5 {
				t.Fatalf("a refused shrink changed the member list: %d members", n)
			}
		})
	}

	names := []string{leader, y[0]} // leaves x[0], x[1], y[1]: az-x holds 2 of 3 → refused
	if _, err := Shrink(ctx, ShrinkOptions{Cluster: cl, Names: names, Zones: zones, Printer: p}); !errors.As(err, new(*ZoneQuorumError)) {
		t.Fatalf("shrink %v: %v, want a ZoneQuorumError", names, err)
	}
	// With the zone rule accepted, the dry run orders the leader last; the shrink then removes both.
	res, err := Shrink(ctx, ShrinkOptions{Cluster: cl, Names: names, Zones: zones, AcceptZoneQuorumLoss: true, DryRun: true, Printer: p})
	if err != nil || !slices.Equal(res.Order, []string{y[0], leader}) || len(res.Removals) != 0 || len(res.Warnings) != 1 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	host := &fakeRetirer{stop: func(member string) { c.Stop(idx(member)) }}
	asked := ""
	res, err = Shrink(ctx, ShrinkOptions{Cluster: cl, Names: names, Zones: zones, AcceptZoneQuorumLoss: true, Host: host, Printer: p,
		Confirm: func(plan string) (bool, error) { asked = plan; return true, nil }})
	if err != nil {
		t.Fatalf("shrink %v: %v", names, err)
	}
	if !strings.Contains(asked, "moving leadership off it first") || len(res.Removals) != 2 || !res.Removals[1].WasLeader || res.Removals[0].WasLeader {
		t.Fatalf("plan %q, result %+v", asked, res)
	}
	if fmt.Sprint(host.retired) != fmt.Sprint([]string{y[0], leader}) {
		t.Fatalf("retired %v", host.retired)
	}
	left := memberNames(t, c)
	slices.Sort(left)
	want := []string{x[0], x[1], y[1]}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("members %v, want %v", left, want)
	}
	got, err := c.ClientTo(t, c.Endpoints()[idx(x[0])]).Get(ctx, "before")
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the write made before the shrink: %v %v", got, err)
	}
}

func idx(name string) int {
	var i int
	fmt.Sscanf(name, "m%d", &i)
	return i
}
