// Package plugins holds hactl-scheduler's out-of-tree plugins (one package each) and Registry, the
// registry hactl-scheduler's main and `validate` run them from.
package plugins

import (
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/hactl/hactl/scheduler/plugins/bindrecorder"
	"github.com/hactl/hactl/scheduler/plugins/maintenanceguard"
	"github.com/hactl/hactl/scheduler/plugins/zonepreference"
)

// Registry returns hactl's plugins by name: ZonePreference, MaintenanceGuard, RecordingBinder.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		zonepreference.Name:   zonepreference.New,
		maintenanceguard.Name: maintenanceguard.New,
		bindrecorder.Name:     bindrecorder.New,
	}
}
