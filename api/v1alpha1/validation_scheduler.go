package v1alpha1

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
)

//go:embed scheduler_plugins.txt
var schedulerPluginsFile string

// SchedulerPlugin kinds, as scheduler_plugins.txt lists them.
type schedulerPluginInfo struct {
	hactl   bool   // one of hactl-scheduler's own plugins
	removed string // removed from Kubernetes: what replaces it
	inTree  bool
}

var schedulerPluginTable = sync.OnceValue(func() map[string]schedulerPluginInfo {
	t := map[string]schedulerPluginInfo{}
	for _, line := range strings.Split(schedulerPluginsFile, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "removed "):
			name, repl, _ := strings.Cut(strings.TrimPrefix(line, "removed "), ": ")
			t[name] = schedulerPluginInfo{removed: repl}
		case strings.HasPrefix(line, "hactl "):
			t[strings.TrimPrefix(line, "hactl ")] = schedulerPluginInfo{hactl: true}
		default:
			t[line] = schedulerPluginInfo{inTree: true}
		}
	}
	return t
})

// SchedulerPluginNames returns the plugins hactl-scheduler has (Kubernetes 1.37's in-tree plugins
// and hactl's), sorted; scheduler_plugins.txt is the list.
func SchedulerPluginNames() []string {
	var names []string
	for n, info := range schedulerPluginTable() {
		if info.removed == "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// SchedulerExtensionPoints are the keys of spec.scheduler.plugins (KubeSchedulerConfiguration v1's
// Plugins fields).
func SchedulerExtensionPoints() []string {
	return []string{"preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
		"reserve", "permit", "preBind", "bind", "postBind", "multiPoint"}
}

// HactlSchedulerPlugins returns, per extension point, the plugins hactl enables itself for s (after
// SetDefaults): ZonePreference at score when s has preferred zones, MaintenanceGuard at filter,
// RecordingBinder at bind (in place of DefaultBinder).
func (s *Scheduler) HactlSchedulerPlugins() map[string][]string {
	m := map[string][]string{"filter": {"MaintenanceGuard"}, "bind": {"RecordingBinder"}}
	if len(s.PreferredZones) > 0 {
		m["score"] = []string{"ZonePreference"}
	}
	return m
}

// DefaultScheduler returns s with SetDefaults' defaults applied (s itself is changed too).
func DefaultScheduler(s *Scheduler) *Scheduler {
	s.setDefaults()
	return s
}

// ValidateStandaloneScheduler checks a defaulted s as spec.scheduler would be checked, for a cluster
// hactl has no spec of (deploy through a kubeconfig): the checks against the spec's hosts (zones,
// replicas per node) are left to the caller, which asks the cluster. Field paths start at path.
func ValidateStandaloneScheduler(s *Scheduler, path *field.Path) field.ErrorList {
	v := &validator{}
	v.schedulerFields(&Cluster{Spec: ClusterSpec{Scheduler: s}}, path)
	return v.errs
}

// forbiddenLeaseNames are Leases owned by Kubernetes' own components.
var forbiddenLeaseNames = []string{"kube-scheduler", "kube-controller-manager"}

// scheduler checks spec.scheduler (see Scheduler's fields for each rule).
func (v *validator) scheduler(c *Cluster, p *field.Path) {
	if c.Spec.Scheduler == nil {
		return
	}
	v.schedulerFields(c, p)
}

func (v *validator) schedulerFields(c *Cluster, p *field.Path) {
	s := c.Spec.Scheduler
	if errs := validation.IsDNS1123Subdomain(s.SchedulerName); len(errs) > 0 {
		v.add(field.Invalid(p.Child("schedulerName"), s.SchedulerName, strings.Join(errs, "; ")))
	} else if s.SchedulerName == kubeSchedulerDefaultName {
		v.add(field.Invalid(p.Child("schedulerName"), s.SchedulerName, "default-scheduler is kube-scheduler's own profile; pods would be placed by both: name hactl-scheduler's profile otherwise, e.g. hactl-scheduler"))
	}
	if strings.ContainsAny(s.Image, " \t\n") {
		v.add(field.Invalid(p.Child("image"), s.Image, "an image reference has no whitespace, e.g. ghcr.io/hactl/hactl-scheduler:v0.1.0"))
	}
	if s.Replicas < 1 {
		v.add(field.Invalid(p.Child("replicas"), s.Replicas, "at least 1"))
	} else if c.Spec.Kubernetes != nil {
		// The replicas tolerate the control planes' NoSchedule taint, as a control-plane component.
		if nodes := len(c.KubeNodes()); s.Replicas > nodes {
			v.add(field.Invalid(p.Child("replicas"), s.Replicas, fmt.Sprintf(
				"the Deployment's replicas require anti-affinity per hostname (one replica per node), and the spec has %d Kubernetes node(s): set replicas to at most %d, or add nodes", nodes, nodes)))
		}
	}
	v.schedulerPort(c, p.Child("securePort"), s.SecurePort)
	v.qualifiedName(p.Child("topologyKey"), s.TopologyKey)
	v.qualifiedName(p.Child("maintenanceLabel"), s.MaintenanceLabel)
	if s.ZonePreferenceWeight < 1 {
		v.add(field.Invalid(p.Child("zonePreferenceWeight"), s.ZonePreferenceWeight, "a score weight is at least 1"))
	}
	v.preferredZones(c, p.Child("preferredZones"), s.PreferredZones)
	v.binPacking(p.Child("binPacking"), s.BinPacking)
	if n := s.PercentageOfNodesToScore; n != nil && (*n < 0 || *n > 100) {
		v.add(field.Invalid(p.Child("percentageOfNodesToScore"), *n, "a percentage, 0-100 (0: kube-scheduler's adaptive default)"))
	}
	v.leaderElection(p.Child("leaderElection"), &s.LeaderElection)
	v.schedulerPlugins(p.Child("plugins"), s)
}

func (v *validator) qualifiedName(p *field.Path, s string) {
	for _, msg := range validation.IsQualifiedName(s) {
		v.add(field.Invalid(p, s, msg))
	}
}

// schedulerPort refuses the ports of the components beside the scheduler on a control-plane host.
func (v *validator) schedulerPort(c *Cluster, p *field.Path, port int) {
	if !validPort(port) {
		v.add(field.Invalid(p, port, "a TCP port between 1 and 65535"))
		return
	}
	clash := kubePortClash(port)
	switch {
	case clash != "":
	case port == c.Spec.Etcd.ClientPort || port == c.Spec.Etcd.PeerPort || port == limits.EtcdMetricsPort:
		clash = fmt.Sprintf("%d is an etcd port on the control planes that are members", port)
	case port == limits.KubeletHealthzPort || port == limits.KubeProxyMetricsPort || port == limits.KubeProxyHealthzPort:
		clash = fmt.Sprintf("%d is a kubelet or kube-proxy port on every node", port)
	case port == DefaultAPIServerPort || (c.Spec.LoadBalancer != nil && (port == c.Spec.LoadBalancer.APIServerPort || port == c.Spec.LoadBalancer.FrontendPort)):
		clash = fmt.Sprintf("%d is the kube-apiserver's or the load balancer's port", port)
	}
	if clash != "" {
		v.add(field.Invalid(p, port, clash+fmt.Sprintf(": the scheduler runs on the control planes' host network; pick another, e.g. %d", DefaultSchedulerSecurePort)))
	}
}

func (v *validator) preferredZones(c *Cluster, p *field.Path, zones []PreferredZone) {
	have := map[string]bool{}
	hosts := c.KubeNodes()
	if c.Spec.Kubernetes == nil {
		hosts = c.Spec.Hosts
	}
	for _, h := range hosts {
		have[h.Zone] = true
	}
	known := make([]string, 0, len(have))
	for z := range have {
		known = append(known, z)
	}
	slices.Sort(known)
	seen := map[string]bool{}
	for i, z := range zones {
		zp := p.Index(i)
		switch {
		case z.Zone == "":
			v.add(field.Required(zp.Child("zone"), "a zone of the hosts, e.g. "+strings.Join(known, ", ")))
		case seen[z.Zone]:
			v.add(field.Duplicate(zp.Child("zone"), z.Zone))
		case len(hosts) > 0 && !have[z.Zone]:
			v.add(field.Invalid(zp.Child("zone"), z.Zone, fmt.Sprintf("no node of the spec is in this zone (zones: %s); a preference for it would never be met", strings.Join(known, ", "))))
		}
		seen[z.Zone] = true
		if z.Weight < 1 || z.Weight > 100 {
			v.add(field.Invalid(zp.Child("weight"), z.Weight, "a weight 1-100"))
		}
	}
}

func (v *validator) binPacking(p *field.Path, b *BinPacking) {
	switch b.Strategy {
	case BinPackingMostAllocated, BinPackingRequestedToCapacity:
	case "LeastAllocated":
		v.add(field.Invalid(p.Child("strategy"), b.Strategy, "LeastAllocated spreads pods, as kube-scheduler already does; hactl-scheduler packs: MostAllocated or RequestedToCapacityRatio"))
	default:
		v.add(field.NotSupported(p.Child("strategy"), b.Strategy, []string{BinPackingMostAllocated, BinPackingRequestedToCapacity}))
	}
	seen := map[string]bool{}
	for i, r := range b.Resources {
		rp := p.Child("resources").Index(i)
		switch {
		case r.Name == "":
			v.add(field.Required(rp.Child("name"), "a resource name, e.g. cpu, memory, nvidia.com/gpu"))
		case seen[r.Name]:
			v.add(field.Duplicate(rp.Child("name"), r.Name))
		}
		seen[r.Name] = true
		if r.Weight < 1 || r.Weight > 100 {
			v.add(field.Invalid(rp.Child("weight"), r.Weight, "a weight 1-100 (NodeResourcesFit's range)"))
		}
	}
	if len(b.Shape) > 0 && b.Strategy != BinPackingRequestedToCapacity {
		v.add(field.Forbidden(p.Child("shape"), "only with strategy RequestedToCapacityRatio"))
	}
	for i, pt := range b.Shape {
		sp := p.Child("shape").Index(i)
		if pt.Utilization < 0 || pt.Utilization > 100 {
			v.add(field.Invalid(sp.Child("utilization"), pt.Utilization, "a percentage, 0-100"))
		} else if i > 0 && pt.Utilization <= b.Shape[i-1].Utilization {
			v.add(field.Invalid(sp.Child("utilization"), pt.Utilization, "utilizations increase strictly"))
		}
		if pt.Score < 0 || pt.Score > 10 {
			v.add(field.Invalid(sp.Child("score"), pt.Score, "a score 0-10"))
		}
	}
}

// leaderElection applies client-go's rule (leaderelection.NewLeaderElector: leaseDuration >
// renewDeadline > JitterFactor 1.2 × retryPeriod, all positive) and keeps the Lease off the
// components' own.
func (v *validator) leaderElection(p *field.Path, le *SchedulerLeaderElection) {
	ld, rd, rp := le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration
	for _, d := range []struct {
		name string
		d    Duration
	}{{"leaseDuration", le.LeaseDuration}, {"renewDeadline", le.RenewDeadline}, {"retryPeriod", le.RetryPeriod}} {
		if d.d.Duration <= 0 {
			v.add(field.Invalid(p.Child(d.name), d.d.String(), "a positive duration"))
		}
	}
	if ld > 0 && rd > 0 && rp > 0 {
		if ld <= rd {
			v.add(field.Invalid(p.Child("leaseDuration"), le.LeaseDuration.String(), fmt.Sprintf("must be greater than renewDeadline (%s): followers would take over while the leader still renews (client-go refuses it)", le.RenewDeadline)))
		}
		if float64(rd) <= 1.2*float64(rp) {
			v.add(field.Invalid(p.Child("renewDeadline"), le.RenewDeadline.String(), fmt.Sprintf("must be greater than 1.2 x retryPeriod (%s, client-go's JitterFactor): the leader could not retry a renewal before its deadline (client-go refuses it, and kube-scheduler exits)", le.RetryPeriod)))
		}
	}
	if slices.Contains(forbiddenLeaseNames, le.ResourceName) {
		v.add(field.Invalid(p.Child("resourceName"), le.ResourceName, "that Lease belongs to Kubernetes' own component: two schedulers on one Lease would take turns with kube-scheduler; keep hactl-scheduler's own (default: the schedulerName)"))
	} else if errs := validation.IsDNS1123Subdomain(le.ResourceName); len(errs) > 0 {
		v.add(field.Invalid(p.Child("resourceName"), le.ResourceName, strings.Join(errs, "; ")))
	}
	if errs := validation.IsDNS1123Label(le.ResourceNamespace); len(errs) > 0 {
		v.add(field.Invalid(p.Child("resourceNamespace"), le.ResourceNamespace, strings.Join(errs, "; ")))
	}
}

func (v *validator) schedulerPlugins(p *field.Path, s *Scheduler) {
	points := SchedulerExtensionPoints()
	own := s.HactlSchedulerPlugins()
	keys := make([]string, 0, len(s.Plugins))
	for k := range s.Plugins {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	table := schedulerPluginTable()
	for _, point := range keys {
		pp := p.Key(point)
		if !slices.Contains(points, point) {
			v.add(field.NotSupported(pp, point, points))
			continue
		}
		set := s.Plugins[point]
		enabled := map[string]bool{}
		for _, n := range own[point] {
			enabled[n] = true
		}
		for i, pl := range set.Enabled {
			ep := pp.Child("enabled").Index(i)
			if !v.pluginName(ep.Child("name"), pl.Name, table, false) {
				continue
			}
			if enabled[pl.Name] {
				msg := "enabled twice at this extension point"
				if slices.Contains(own[point], pl.Name) {
					msg = "hactl enables it here already (spec.scheduler's own settings)"
				}
				e := field.Duplicate(ep.Child("name"), pl.Name)
				e.Detail = msg
				v.add(e)
			}
			enabled[pl.Name] = true
			if pl.Weight != nil {
				switch {
				case point != "score" && point != "multiPoint":
					v.add(field.Forbidden(ep.Child("weight"), "a weight is for the score extension point only"))
				case *pl.Weight < 1:
					v.add(field.Invalid(ep.Child("weight"), *pl.Weight, "a score weight is at least 1 (0 or less would cancel or invert the plugin's score)"))
				}
			}
		}
		for i, pl := range set.Disabled {
			v.pluginName(pp.Child("disabled").Index(i).Child("name"), pl.Name, table, true)
		}
	}
}

// pluginName reports an empty, unknown or removed plugin name; "*" (all defaults) only when disabling.
func (v *validator) pluginName(p *field.Path, name string, table map[string]schedulerPluginInfo, disabling bool) bool {
	info, ok := table[name]
	switch {
	case name == "":
		v.add(field.Required(p, "a plugin name"))
	case name == "*" && disabling:
		return true
	case !ok:
		v.add(field.NotSupported(p, name, SchedulerPluginNames()))
	case info.removed != "":
		v.add(field.Invalid(p, name, "removed from Kubernetes; use "+info.removed))
	default:
		return true
	}
	return false
}
