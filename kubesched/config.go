// Package kubesched renders and deploys hactl-scheduler (the scheduler/ module) from spec.scheduler:
// its KubeSchedulerConfiguration (Config), the static pod and files it runs from on the control
// planes, its RBAC, and the deploy over SSH. Validation of spec.scheduler is api/v1alpha1's; the
// scheduler's own validation of the rendered file is `hactl-scheduler validate`, which Deploy runs
// on a control plane with the image it deploys before anything is swapped in.
package kubesched

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	componentbase "k8s.io/component-base/config/v1alpha1"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
)

// Files and names of a deployed hactl-scheduler on a control-plane host.
const (
	// Dir holds the configuration and the kubeconfig, readable by the scheduler's uid only.
	Dir = "/etc/kubernetes/hactl-scheduler"
	// ConfigFile is the KubeSchedulerConfiguration.
	ConfigFile = Dir + "/config.yaml"
	// KubeconfigFile is the scheduler's kubeconfig: user User, the host's own kube-apiserver.
	KubeconfigFile = Dir + "/kubeconfig"
	// ManifestFile is the static pod kubelet runs.
	ManifestFile = "/etc/kubernetes/manifests/hactl-scheduler.yaml"
	// User is the scheduler's Kubernetes user (its client certificate's common name) and, in
	// Deployment mode, its ServiceAccount's name.
	User = "hactl-scheduler"
	// UID is the non-root user the image runs as (distroless' nonroot); Dir belongs to it.
	UID = 65532
	// BoundByAnnotation is the annotation RecordingBinder puts on every pod it binds (the binding
	// replica's identity: hostname "_" instance ID).
	BoundByAnnotation = "scheduler.hactl.io/bound-by"
)

// zonePreferenceArgs and maintenanceGuardArgs are the v1 args of hactl-scheduler's plugins
// (scheduler/apis/config/v1), written here so the root module needs no k8s.io/kubernetes.
type zonePreferenceArgs struct {
	metav1.TypeMeta `json:",inline"`
	PreferredZones  []v1alpha1.PreferredZone `json:"preferredZones"`
	TopologyKey     string                   `json:"topologyKey"`
}

type maintenanceGuardArgs struct {
	metav1.TypeMeta `json:",inline"`
	Label           string `json:"label"`
}

func (a *zonePreferenceArgs) DeepCopyObject() runtime.Object   { c := *a; return &c }
func (a *maintenanceGuardArgs) DeepCopyObject() runtime.Object { c := *a; return &c }

func argsMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: schedv1.SchemeGroupVersion.String(), Kind: kind}
}

// Config returns s (defaulted and validated by api/v1alpha1) as a KubeSchedulerConfiguration v1:
// one profile named s.SchedulerName with ZonePreference at score (when s has preferred zones, at
// s.ZonePreferenceWeight), MaintenanceGuard at filter, RecordingBinder in place of DefaultBinder,
// NodeResourcesFit scoring by s.BinPacking with NodeResourcesBalancedAllocation disabled and no
// default PodTopologySpread constraints (both spread pods), then
// s.Plugins; Lease leader election with s's timings on s's Lease. kubeconfig is the file the
// scheduler reaches the API with ("" in a pod: the in-cluster configuration).
func Config(s *v1alpha1.Scheduler, kubeconfig string) *schedv1.KubeSchedulerConfiguration {
	t := true
	le := s.LeaderElection
	prof := schedv1.KubeSchedulerProfile{
		SchedulerName:            &s.SchedulerName,
		PercentageOfNodesToScore: s.PercentageOfNodesToScore,
		Plugins:                  &schedv1.Plugins{},
	}
	pl := prof.Plugins
	pl.Filter.Enabled = append(pl.Filter.Enabled, schedv1.Plugin{Name: "MaintenanceGuard"})
	pl.Bind.Enabled = append(pl.Bind.Enabled, schedv1.Plugin{Name: "RecordingBinder"})
	pl.Bind.Disabled = append(pl.Bind.Disabled, schedv1.Plugin{Name: "DefaultBinder"})
	pl.Score.Disabled = append(pl.Score.Disabled, schedv1.Plugin{Name: "NodeResourcesBalancedAllocation"})
	if len(s.PreferredZones) > 0 {
		w := s.ZonePreferenceWeight
		pl.Score.Enabled = append(pl.Score.Enabled, schedv1.Plugin{Name: "ZonePreference", Weight: &w})
		prof.PluginConfig = append(prof.PluginConfig, schedv1.PluginConfig{Name: "ZonePreference", Args: runtime.RawExtension{
			Object: &zonePreferenceArgs{TypeMeta: argsMeta("ZonePreferenceArgs"), PreferredZones: s.PreferredZones, TopologyKey: s.TopologyKey}}})
	}
	prof.PluginConfig = append(prof.PluginConfig,
		schedv1.PluginConfig{Name: "MaintenanceGuard", Args: runtime.RawExtension{
			Object: &maintenanceGuardArgs{TypeMeta: argsMeta("MaintenanceGuardArgs"), Label: s.MaintenanceLabel}}},
		schedv1.PluginConfig{Name: "NodeResourcesFit", Args: runtime.RawExtension{Object: fitArgs(s.BinPacking)}},
		// kube-scheduler's system default spreading (PodTopologySpread, weight 2, by hostname and
		// zone for every pod of a workload) would outweigh packing: only the constraints pods set
		// themselves apply (kubernetes.io/docs: "disable cluster-level default constraints").
		schedv1.PluginConfig{Name: "PodTopologySpread", Args: runtime.RawExtension{Object: &schedv1.PodTopologySpreadArgs{
			TypeMeta: argsMeta("PodTopologySpreadArgs"), DefaultingType: schedv1.ListDefaulting}}})
	for _, point := range v1alpha1.SchedulerExtensionPoints() {
		set, ok := s.Plugins[point]
		if !ok {
			continue
		}
		ps := pluginSet(pl, point)
		for _, p := range set.Enabled {
			ps.Enabled = append(ps.Enabled, schedv1.Plugin{Name: p.Name, Weight: p.Weight})
		}
		for _, p := range set.Disabled {
			ps.Disabled = append(ps.Disabled, schedv1.Plugin{Name: p.Name})
		}
	}
	return &schedv1.KubeSchedulerConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: schedv1.SchemeGroupVersion.String(), Kind: "KubeSchedulerConfiguration"},
		LeaderElection: componentbase.LeaderElectionConfiguration{
			LeaderElect:       &t,
			LeaseDuration:     metav1.Duration{Duration: le.LeaseDuration.Duration},
			RenewDeadline:     metav1.Duration{Duration: le.RenewDeadline.Duration},
			RetryPeriod:       metav1.Duration{Duration: le.RetryPeriod.Duration},
			ResourceLock:      "leases",
			ResourceName:      le.ResourceName,
			ResourceNamespace: le.ResourceNamespace,
		},
		ClientConnection: componentbase.ClientConnectionConfiguration{Kubeconfig: kubeconfig},
		Profiles:         []schedv1.KubeSchedulerProfile{prof},
	}
}

func fitArgs(b *v1alpha1.BinPacking) *schedv1.NodeResourcesFitArgs {
	st := &schedv1.ScoringStrategy{Type: schedv1.ScoringStrategyType(b.Strategy)}
	for _, r := range b.Resources {
		st.Resources = append(st.Resources, schedv1.ResourceSpec{Name: r.Name, Weight: r.Weight})
	}
	if b.Strategy == v1alpha1.BinPackingRequestedToCapacity {
		st.RequestedToCapacityRatio = &schedv1.RequestedToCapacityRatioParam{}
		for _, p := range b.Shape {
			st.RequestedToCapacityRatio.Shape = append(st.RequestedToCapacityRatio.Shape, schedv1.UtilizationShapePoint{Utilization: p.Utilization, Score: p.Score})
		}
	}
	return &schedv1.NodeResourcesFitArgs{TypeMeta: argsMeta("NodeResourcesFitArgs"), ScoringStrategy: st}
}

func pluginSet(p *schedv1.Plugins, point string) *schedv1.PluginSet {
	m := map[string]*schedv1.PluginSet{
		"preEnqueue": &p.PreEnqueue, "queueSort": &p.QueueSort, "preFilter": &p.PreFilter, "filter": &p.Filter,
		"postFilter": &p.PostFilter, "preScore": &p.PreScore, "score": &p.Score, "reserve": &p.Reserve,
		"permit": &p.Permit, "preBind": &p.PreBind, "bind": &p.Bind, "postBind": &p.PostBind, "multiPoint": &p.MultiPoint,
		"placementGenerate": &p.PlacementGenerate, "placementScore": &p.PlacementScore, "podGroupPostFilter": &p.PodGroupPostFilter,
	}
	return m[point]
}

// ConfigYAML is Config as the YAML file the scheduler reads, without the empty extension points and
// unset client settings the v1 types would print (kube-scheduler defaults them alike).
func ConfigYAML(s *v1alpha1.Scheduler, kubeconfig string) ([]byte, error) {
	js, err := json.Marshal(Config(s, kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("rendering the KubeSchedulerConfiguration: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("rendering the KubeSchedulerConfiguration: %w", err)
	}
	if cc, ok := doc["clientConnection"].(map[string]any); ok {
		for k, v := range cc {
			if v == "" || v == float64(0) {
				delete(cc, k)
			}
		}
		if len(cc) == 0 {
			delete(doc, "clientConnection")
		}
	}
	for _, p := range doc["profiles"].([]any) {
		plugins := p.(map[string]any)["plugins"].(map[string]any)
		for k, v := range plugins {
			if m, ok := v.(map[string]any); ok && len(m) == 0 {
				delete(plugins, k)
			}
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("rendering the KubeSchedulerConfiguration: %w", err)
	}
	return out, nil
}
