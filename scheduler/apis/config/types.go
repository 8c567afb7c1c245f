// Package config holds the internal (unversioned) types of hactl-scheduler's plugin arguments, the
// shape the plugins' New functions receive. They are registered in kube-scheduler's own API group
// (kubescheduler.config.k8s.io, version __internal) next to the in-tree plugins' args, so that a
// KubeSchedulerConfiguration carrying them decodes, defaults and converts exactly like NodeResourcesFitArgs;
// the versioned (v1) types users write are in package v1.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is kube-scheduler's internal configuration version, which these types join.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: runtime.APIVersionInternal}

// ZonePreferenceArgs configures the ZonePreference score plugin.
type ZonePreferenceArgs struct {
	metav1.TypeMeta

	// PreferredZones are the zones pods should land in, each with a weight (1-100); a node in a zone
	// of weight w scores w, normalised so that the heaviest zone scores MaxNodeScore (100). Nodes in
	// no listed zone score 0.
	PreferredZones []PreferredZone
	// TopologyKey is the node label holding the zone (defaulted to topology.kubernetes.io/zone).
	TopologyKey string
}

// PreferredZone is one zone with its weight.
type PreferredZone struct {
	Zone   string
	Weight int32
}

// MaintenanceGuardArgs configures the MaintenanceGuard filter plugin.
type MaintenanceGuardArgs struct {
	metav1.TypeMeta

	// Label is the node label whose presence (any value) marks a node as under maintenance
	// (defaulted to hactl.io/maintenance, the label `hactl maintenance start` sets).
	Label string
}

// DeepCopyObject implements runtime.Object.
func (in *ZonePreferenceArgs) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := *in
	out.PreferredZones = append([]PreferredZone(nil), in.PreferredZones...)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *MaintenanceGuardArgs) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := *in
	return &out
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &ZonePreferenceArgs{}, &MaintenanceGuardArgs{})
	return nil
}

// AddToScheme registers the internal types in scheme.
func AddToScheme(scheme *runtime.Scheme) error { return addKnownTypes(scheme) }

func init() {
	// kube-scheduler builds the scheme it converts and defaults plugin args with lazily from its
	// SchemeBuilders (pkg/scheduler/apis/config/v1.GetPluginArgConversionScheme); registering here
	// puts hactl's args in that scheme too.
	schedconfig.SchemeBuilder.Register(addKnownTypes)
}
