// Package validation checks hactl-scheduler's plugin args after defaulting; each plugin's New calls
// its function, so a bad config stops the scheduler (and `hactl-scheduler validate`) with field paths
// such as profiles[0].pluginConfig[2].args.preferredZones[1].weight.
package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/scheduler/apis/config"
)

// MaxZoneWeight is the largest weight of a preferred zone (kube-scheduler's MaxNodeScore).
const MaxZoneWeight = 100

// ValidateZonePreferenceArgs returns an aggregate of field errors under path: no preferred zone, an
// empty, invalid (not a label value) or repeated zone, a weight outside 1-MaxZoneWeight, a topologyKey
// that is not a qualified label name. nil when args are valid.
func ValidateZonePreferenceArgs(path *field.Path, args *config.ZonePreferenceArgs) error {
	var errs field.ErrorList
	zones := path.Child("preferredZones")
	if len(args.PreferredZones) == 0 {
		errs = append(errs, field.Required(zones, "at least one zone"))
	}
	seen := sets.New[string]()
	for i, z := range args.PreferredZones {
		p := zones.Index(i)
		switch {
		case z.Zone == "":
			errs = append(errs, field.Required(p.Child("zone"), "the zone's label value"))
		case seen.Has(z.Zone):
			errs = append(errs, field.Duplicate(p.Child("zone"), z.Zone))
		default:
			for _, msg := range validation.IsValidLabelValue(z.Zone) {
				errs = append(errs, field.Invalid(p.Child("zone"), z.Zone, msg))
			}
		}
		seen.Insert(z.Zone)
		if z.Weight < 1 || z.Weight > MaxZoneWeight {
			errs = append(errs, field.Invalid(p.Child("weight"), z.Weight, fmt.Sprintf("must be 1-%d", MaxZoneWeight)))
		}
	}
	errs = append(errs, labelKey(path.Child("topologyKey"), args.TopologyKey)...)
	return errs.ToAggregate()
}

// ValidateMaintenanceGuardArgs returns an aggregate of field errors under path: a label that is not a
// qualified label name. nil when args are valid.
func ValidateMaintenanceGuardArgs(path *field.Path, args *config.MaintenanceGuardArgs) error {
	return labelKey(path.Child("label"), args.Label).ToAggregate()
}

func labelKey(p *field.Path, key string) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(p, "a node label key")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(key) {
		errs = append(errs, field.Invalid(p, key, msg))
	}
	return errs
}
