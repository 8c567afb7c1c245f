package v1

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	schedv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/hactl/hactl/scheduler/apis/config"
)

// Defaults of the plugin args.
const (
	// DefaultTopologyKey is the well-known zone label kubelet and hactl set on every node.
	DefaultTopologyKey = "topology.kubernetes.io/zone"
	// DefaultMaintenanceLabel is the node label `hactl maintenance start` sets.
	DefaultMaintenanceLabel = "hactl.io/maintenance"
)

// SchemeGroupVersion is kube-scheduler's v1 configuration version, which these types join.
var SchemeGroupVersion = schedv1.SchemeGroupVersion

// AddToScheme registers the v1 types, their defaults and their conversions in scheme.
func AddToScheme(scheme *runtime.Scheme) error {
	for _, f := range []func(*runtime.Scheme) error{addKnownTypes, addDefaultingFuncs, addConversionFuncs} {
		if err := f(scheme); err != nil {
			return err
		}
	}
	return nil
}

func init() {
	// The lazily built plugin-args scheme of kube-scheduler (see package config) reads this builder.
	schedv1.SchemeBuilder.Register(addKnownTypes, addDefaultingFuncs, addConversionFuncs)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &ZonePreferenceArgs{}, &MaintenanceGuardArgs{})
	return nil
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&ZonePreferenceArgs{}, func(o any) { SetDefaultsZonePreferenceArgs(o.(*ZonePreferenceArgs)) })
	scheme.AddTypeDefaultingFunc(&MaintenanceGuardArgs{}, func(o any) { SetDefaultsMaintenanceGuardArgs(o.(*MaintenanceGuardArgs)) })
	return nil
}

// SetDefaultsZonePreferenceArgs sets TopologyKey to DefaultTopologyKey when unset.
func SetDefaultsZonePreferenceArgs(a *ZonePreferenceArgs) {
	if a.TopologyKey == nil || *a.TopologyKey == "" {
		k := DefaultTopologyKey
		a.TopologyKey = &k
	}
}

// SetDefaultsMaintenanceGuardArgs sets Label to DefaultMaintenanceLabel when unset.
func SetDefaultsMaintenanceGuardArgs(a *MaintenanceGuardArgs) {
	if a.Label == nil || *a.Label == "" {
		l := DefaultMaintenanceLabel
		a.Label = &l
	}
}

func addConversionFuncs(scheme *runtime.Scheme) error {
	funcs := []struct {
		a, b any
		fn   conversion.ConversionFunc
	}{
		{(*ZonePreferenceArgs)(nil), (*config.ZonePreferenceArgs)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*ZonePreferenceArgs), b.(*config.ZonePreferenceArgs)
			out.PreferredZones = make([]config.PreferredZone, len(in.PreferredZones))
			for i, z := range in.PreferredZones {
				out.PreferredZones[i] = config.PreferredZone{Zone: z.Zone, Weight: z.Weight}
			}
			out.TopologyKey = deref(in.TopologyKey)
			return nil
		}},
		{(*config.ZonePreferenceArgs)(nil), (*ZonePreferenceArgs)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*config.ZonePreferenceArgs), b.(*ZonePreferenceArgs)
			out.PreferredZones = make([]PreferredZone, len(in.PreferredZones))
			for i, z := range in.PreferredZones {
				out.PreferredZones[i] = PreferredZone{Zone: z.Zone, Weight: z.Weight}
			}
			k := in.TopologyKey
			out.TopologyKey = &k
			return nil
		}},
		{(*MaintenanceGuardArgs)(nil), (*config.MaintenanceGuardArgs)(nil), func(a, b any, _ conversion.Scope) error {
			b.(*config.MaintenanceGuardArgs).Label = deref(a.(*MaintenanceGuardArgs).Label)
			return nil
		}},
		{(*config.MaintenanceGuardArgs)(nil), (*MaintenanceGuardArgs)(nil), func(a, b any, _ conversion.Scope) error {
			l := a.(*config.MaintenanceGuardArgs).Label
			b.(*MaintenanceGuardArgs).Label = &l
			return nil
		}},
	}
	for _, f := range funcs {
		if err := scheme.AddConversionFunc(f.a, f.b, f.fn); err != nil {
			return err
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
