package zonepreference

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hactl/hactl/scheduler/apis/config"
)

func node(name, zone string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	labels := map[string]string{}
	if zone != "" {
		labels["topology.kubernetes.io/zone"] = zone
	}
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	return ni
}

func TestScoreAndNormalize(t *testing.T) {
	pl, err := New(context.Background(), &config.ZonePreferenceArgs{
		TopologyKey:    "topology.kubernetes.io/zone",
		PreferredZones: []config.PreferredZone{{Zone: "az-a", Weight: 80}, {Zone: "az-b", Weight: 40}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := pl.(*ZonePreference)
	nodes := []fwk.NodeInfo{node("a", "az-a"), node("b", "az-b"), node("c", "az-c"), node("x", "")}
	var scores fwk.NodeScoreList
	for _, n := range nodes {
		s, st := p.Score(context.Background(), nil, &v1.Pod{}, n)
		if !st.IsSuccess() {
			t.Fatalf("Score(%s): %v", n.Node().Name, st)
		}
		scores = append(scores, fwk.NodeScore{Name: n.Node().Name, Score: s})
	}
	if want := []int64{80, 40, 0, 0}; !equal(scores, want) {
		t.Fatalf("raw scores %v, want %v", scores, want)
	}
	if st := p.NormalizeScore(context.Background(), nil, &v1.Pod{}, scores); !st.IsSuccess() {
		t.Fatal(st)
	}
	if want := []int64{100, 50, 0, 0}; !equal(scores, want) {
		t.Fatalf("normalised scores %v, want %v", scores, want)
	}
}

func equal(s fwk.NodeScoreList, want []int64) bool {
	for i := range s {
		if s[i].Score != want[i] {
			return false
		}
	}
	return len(s) == len(want)
}

func TestNewRejectsBadArgs(t *testing.T) {
	for name, tc := range map[string]struct {
		args config.ZonePreferenceArgs
		want string
	}{
		"no zones":       {config.ZonePreferenceArgs{TopologyKey: "k"}, "args.preferredZones: Required"},
		"zero weight":    {config.ZonePreferenceArgs{TopologyKey: "k", PreferredZones: []config.PreferredZone{{Zone: "a"}}}, "args.preferredZones[0].weight: Invalid value: 0"},
		"weight > 100":   {config.ZonePreferenceArgs{TopologyKey: "k", PreferredZones: []config.PreferredZone{{Zone: "a", Weight: 101}}}, "args.preferredZones[0].weight"},
		"duplicate zone": {config.ZonePreferenceArgs{TopologyKey: "k", PreferredZones: []config.PreferredZone{{Zone: "a", Weight: 1}, {Zone: "a", Weight: 2}}}, "args.preferredZones[1].zone: Duplicate"},
		"bad key":        {config.ZonePreferenceArgs{TopologyKey: "a b", PreferredZones: []config.PreferredZone{{Zone: "a", Weight: 1}}}, "args.topologyKey: Invalid"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), &tc.args, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(context.Background(), nil, nil); err == nil {
		t.Fatal("New(nil args): no error")
	}
}
