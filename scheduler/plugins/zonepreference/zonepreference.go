// Package zonepreference is the ZonePreference score plugin: nodes in the zones of its preferredZones
// score their zone's weight (normalised so the best zone among the candidates scores 100), all other
// nodes 0. Unlike NodeAffinity's preferred terms it needs nothing in the pod: the profile carries the
// preference, so every pod of the scheduler's profile follows it.
package zonepreference

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"

	"github.com/hactl/hactl/scheduler/apis/config"
	"github.com/hactl/hactl/scheduler/apis/config/validation"
)

// Name is the plugin's name in the registry and in KubeSchedulerConfiguration.
const Name = "ZonePreference"

// ZonePreference scores nodes by their zone label.
type ZonePreference struct {
	key     string
	weights map[string]int64
}

var (
	_ fwk.ScorePlugin     = &ZonePreference{}
	_ fwk.ScoreExtensions = &ZonePreference{}
	_ fwk.SignPlugin      = &ZonePreference{}
)

// New builds the plugin from its args (*config.ZonePreferenceArgs, defaulted and converted by
// kube-scheduler's scheme). It returns the validation errors of the args with their field path
// under "args", or an error naming the type when args is something else.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.ZonePreferenceArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type ZonePreferenceArgs, got %T (is pluginConfig's apiVersion kubescheduler.config.k8s.io/v1?)", Name, obj)
	}
	if err := validation.ValidateZonePreferenceArgs(field.NewPath("args"), args); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	p := &ZonePreference{key: args.TopologyKey, weights: make(map[string]int64, len(args.PreferredZones))}
	for _, z := range args.PreferredZones {
		p.weights[z.Zone] = int64(z.Weight)
	}
	return p, nil
}

// Name returns Name.
func (p *ZonePreference) Name() string { return Name }

// SignPod returns no fragment: the score depends on the node only, so pods of one profile share it
// and the scheduler may batch them (KEP-5598).
func (p *ZonePreference) SignPod(context.Context, *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}

// Score returns the weight of the node's zone, 0 when the node is in no preferred zone or lacks the label.
func (p *ZonePreference) Score(_ context.Context, _ fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	return p.weights[node.Labels[p.key]], nil
}

// ScoreExtensions returns the plugin itself: it normalises its scores.
func (p *ZonePreference) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore scales the scores to 0-MaxNodeScore, the best candidate's zone at MaxNodeScore.
func (p *ZonePreference) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	return helper.DefaultNormalizeScore(fwk.MaxNodeScore, false, scores)
}
