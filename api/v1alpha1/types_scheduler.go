package v1alpha1

// Scheduler is hactl-scheduler, a second kube-scheduler with hactl's plugins (the scheduler/ module):
// pods that set schedulerName to SchedulerName are placed by it, preferring PreferredZones and
// packing nodes (NodeResourcesFit's MostAllocated instead of spreading), never onto a node under
// maintenance. `hactl scheduler config` renders its KubeSchedulerConfiguration; `hactl scheduler
// deploy` runs it as static pods on the control planes (over SSH) or as a Deployment (through a
// kubeconfig), with Lease leader election in both.
type Scheduler struct {
	// SchedulerName is the profile's name, the schedulerName pods select it by (default
	// hactl-scheduler; never default-scheduler, which is kube-scheduler's).
	SchedulerName string `json:"schedulerName,omitempty"`
	// Image is the scheduler's image reference (a registry reference; pulled by the nodes). Empty
	// with ImageArchive: the reference the archive holds.
	Image string `json:"image,omitempty"`
	// ImageArchive is a local `docker save` or OCI archive holding the image (`make
	// scheduler-image` writes bin/hactl-scheduler-image.tar), uploaded and imported into containerd on
	// the nodes that run the scheduler; `--image-archive` overrides it.
	ImageArchive string `json:"imageArchive,omitempty"`
	// Replicas is the Deployment's replica count when deployed through a kubeconfig (default 3; one
	// per node, required anti-affinity). Static pods run one per control-plane host.
	Replicas int `json:"replicas,omitempty"`
	// SecurePort is the scheduler's HTTPS port for health and metrics (default 10261): on the host
	// network of a control plane it must not be kube-scheduler's 10259 or another component's port.
	SecurePort int `json:"securePort,omitempty"`
	// BindAddress is where the static pods (over SSH) serve that port on the control planes' host
	// network: 127.0.0.1 (default; kubeadm's kube-scheduler binds loopback the same way, so only the
	// host itself reaches /metrics), 0.0.0.0 (every address: for a Prometheus scraping the hosts), or
	// ::1 / :: for IPv6. One manifest serves every host, so a host's own address is not accepted. The
	// Deployment's pods (through a kubeconfig) listen on their pod IP.
	BindAddress string `json:"bindAddress,omitempty"`
	// PreferredZones are the zones its pods should land in, each with a weight 1-100 (the
	// ZonePreference plugin); every zone must be the zone of a host in the spec. Empty: no preference.
	PreferredZones []PreferredZone `json:"preferredZones,omitempty"`
	// TopologyKey is the node label holding the zone (default topology.kubernetes.io/zone, the label
	// hactl puts on every node).
	TopologyKey string `json:"topologyKey,omitempty"`
	// ZonePreferenceWeight is the ZonePreference plugin's score weight (default 5; NodeResourcesFit's
	// is 1), so the zone outweighs packing.
	ZonePreferenceWeight int32 `json:"zonePreferenceWeight,omitempty"`
	// BinPacking is NodeResourcesFit's scoring strategy (default MostAllocated on cpu and memory,
	// weight 1 each); NodeResourcesBalancedAllocation, which spreads, is disabled.
	BinPacking *BinPacking `json:"binPacking,omitempty"`
	// PercentageOfNodesToScore is the share of feasible nodes scored, 0-100 (0 or unset:
	// kube-scheduler's adaptive default).
	PercentageOfNodesToScore *int32 `json:"percentageOfNodesToScore,omitempty"`
	// LeaderElection is the Lease election among the replicas.
	LeaderElection SchedulerLeaderElection `json:"leaderElection,omitzero"`
	// MaintenanceLabel is the node label the MaintenanceGuard plugin filters on (default
	// hactl.io/maintenance, the label `hactl maintenance start` sets).
	MaintenanceLabel string `json:"maintenanceLabel,omitempty"`
	// Plugins enables or disables more plugins per extension point (preEnqueue, queueSort, preFilter,
	// filter, postFilter, preScore, score, reserve, permit, preBind, bind, postBind, multiPoint), as a
	// KubeSchedulerConfiguration profile's plugins do; hactl's own choices above are applied first.
	Plugins map[string]PluginSet `json:"plugins,omitempty"`
}

// PreferredZone is one preferred zone and its weight.
type PreferredZone struct {
	Zone   string `json:"zone"`
	Weight int32  `json:"weight"`
}

// BinPacking is NodeResourcesFit's scoring strategy.
type BinPacking struct {
	// Strategy is MostAllocated (default) or RequestedToCapacityRatio.
	Strategy string `json:"strategy,omitempty"`
	// Resources are the resources scored, with weights 1-100 (default cpu and memory, 1 each).
	Resources []ResourceWeight `json:"resources,omitempty"`
	// Shape is RequestedToCapacityRatio's utilisation → score function (default {0, 0}, {100, 10}:
	// fuller nodes score higher); only with that strategy.
	Shape []UtilizationShapePoint `json:"shape,omitempty"`
}

// ResourceWeight is one scored resource.
type ResourceWeight struct {
	Name   string `json:"name"`
	Weight int64  `json:"weight"`
}

// UtilizationShapePoint is one point of RequestedToCapacityRatio's function: utilization 0-100 (%),
// score 0-10, utilizations strictly increasing.
type UtilizationShapePoint struct {
	Utilization int32 `json:"utilization"`
	Score       int32 `json:"score"`
}

// SchedulerLeaderElection is the replicas' Lease election (client-go's leaderelection).
type SchedulerLeaderElection struct {
	// LeaseDuration is how long followers wait after the last renewal before they take over (default
	// 15s; whole seconds: the Lease stores leaseDurationSeconds, which is what the followers wait).
	LeaseDuration Duration `json:"leaseDuration,omitzero"`
	// RenewDeadline is how long the leader keeps retrying a renewal before it gives up leading
	// (default 10s); must be below LeaseDuration and above 1.2 × RetryPeriod (client-go's rule).
	RenewDeadline Duration `json:"renewDeadline,omitzero"`
	// RetryPeriod is the interval between attempts to acquire or renew (default 2s).
	RetryPeriod Duration `json:"retryPeriod,omitzero"`
	// ResourceName is the Lease's name (default the SchedulerName); never kube-scheduler or
	// kube-controller-manager, whose Leases belong to those components.
	ResourceName string `json:"resourceName,omitempty"`
	// ResourceNamespace is the Lease's namespace (default kube-system).
	ResourceNamespace string `json:"resourceNamespace,omitempty"`
}

// PluginSet is the plugins enabled and disabled at one extension point.
type PluginSet struct {
	Enabled  []SchedulerPlugin `json:"enabled,omitempty"`
	Disabled []SchedulerPlugin `json:"disabled,omitempty"`
}

// SchedulerPlugin names a plugin; Weight is for the score and placementScore extension points (and
// multiPoint, for a plugin that scores) only, at least 1, and given once per plugin: a weight the
// scheduler framework would drop (multiPoint's overridden by score's) is refused.
type SchedulerPlugin struct {
	Name   string `json:"name"`
	Weight *int32 `json:"weight,omitempty"`
}

// Scheduler defaults.
const (
	DefaultSchedulerName          = "hactl-scheduler"
	DefaultSchedulerSecurePort    = 10261
	DefaultSchedulerBindAddress   = "127.0.0.1"
	DefaultSchedulerReplicas      = 3
	DefaultZonePreferenceWeight   = 5
	DefaultSchedulerTopologyKey   = "topology.kubernetes.io/zone"
	DefaultMaintenanceLabel       = "hactl.io/maintenance"
	DefaultLeaseNamespace         = "kube-system"
	BinPackingMostAllocated       = "MostAllocated"
	BinPackingRequestedToCapacity = "RequestedToCapacityRatio"
	kubeSchedulerDefaultName      = "default-scheduler"
	defaultSchedulerLeaseDuration = 15e9
	defaultSchedulerRenewDeadline = 10e9
	defaultSchedulerRetryPeriod   = 2e9
)

func (s *Scheduler) setDefaults() []*string {
	if s.SchedulerName == "" {
		s.SchedulerName = DefaultSchedulerName
	}
	if s.Replicas == 0 {
		s.Replicas = DefaultSchedulerReplicas
	}
	if s.SecurePort == 0 {
		s.SecurePort = DefaultSchedulerSecurePort
	}
	if s.BindAddress == "" {
		s.BindAddress = DefaultSchedulerBindAddress
	}
	if s.TopologyKey == "" {
		s.TopologyKey = DefaultSchedulerTopologyKey
	}
	if s.ZonePreferenceWeight == 0 {
		s.ZonePreferenceWeight = DefaultZonePreferenceWeight
	}
	if s.MaintenanceLabel == "" {
		s.MaintenanceLabel = DefaultMaintenanceLabel
	}
	if s.BinPacking == nil {
		s.BinPacking = &BinPacking{}
	}
	b := s.BinPacking
	if b.Strategy == "" {
		b.Strategy = BinPackingMostAllocated
	}
	if len(b.Resources) == 0 {
		b.Resources = []ResourceWeight{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}
	}
	if b.Strategy == BinPackingRequestedToCapacity && len(b.Shape) == 0 {
		b.Shape = []UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}
	}
	le := &s.LeaderElection
	if le.LeaseDuration.Duration == 0 {
		le.LeaseDuration.Duration = defaultSchedulerLeaseDuration
	}
	if le.RenewDeadline.Duration == 0 {
		le.RenewDeadline.Duration = defaultSchedulerRenewDeadline
	}
	if le.RetryPeriod.Duration == 0 {
		le.RetryPeriod.Duration = defaultSchedulerRetryPeriod
	}
	if le.ResourceName == "" {
		le.ResourceName = s.SchedulerName
	}
	if le.ResourceNamespace == "" {
		le.ResourceNamespace = DefaultLeaseNamespace
	}
	return []*string{&s.ImageArchive}
}
