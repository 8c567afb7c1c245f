// Package v1 holds the versioned (kubescheduler.config.k8s.io/v1) arguments of hactl-scheduler's
// plugins as users write them in a KubeSchedulerConfiguration's pluginConfig, their defaults and their
// conversion to the internal types of package config. Registered in kube-scheduler's own v1 scheme, they
// are decoded strictly (an unknown or misspelt field is an error, not ignored), as in-tree args are.
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ZonePreferenceArgs configures the ZonePreference score plugin (kind ZonePreferenceArgs).
type ZonePreferenceArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PreferredZones are the zones pods should land in, each with a weight 1-100.
	PreferredZones []PreferredZone `json:"preferredZones,omitempty"`
	// TopologyKey is the node label holding the zone (default topology.kubernetes.io/zone).
	TopologyKey *string `json:"topologyKey,omitempty"`
}

// PreferredZone is one zone with its weight.
type PreferredZone struct {
	Zone   string `json:"zone"`
	Weight int32  `json:"weight"`
}

// MaintenanceGuardArgs configures the MaintenanceGuard filter plugin (kind MaintenanceGuardArgs).
type MaintenanceGuardArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Label is the node label marking maintenance (default hactl.io/maintenance).
	Label *string `json:"label,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (in *ZonePreferenceArgs) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := *in
	out.PreferredZones = append([]PreferredZone(nil), in.PreferredZones...)
	if in.TopologyKey != nil {
		k := *in.TopologyKey
		out.TopologyKey = &k
	}
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *MaintenanceGuardArgs) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := *in
	if in.Label != nil {
		l := *in.Label
		out.Label = &l
	}
	return &out
}
