package v1alpha1

import (
	_ "embed"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
)

//go:embed scheduler_plugins.txt
var schedulerPluginsFile string

// schedulerPluginInfo is one line of scheduler_plugins.txt.
type schedulerPluginInfo struct {
	hactl   bool     // one of hactl-scheduler's own plugins
	removed string   // removed from Kubernetes: what replaces it
	points  []string // the extension points it implements (what multiPoint expands it to)
}

// schedulerPoints is the "points" line of scheduler_plugins.txt.
var schedulerPoints = sync.OnceValue(func() []string {
	for _, line := range strings.Split(schedulerPluginsFile, "\n") {
		if rest, ok := strings.CutPrefix(line, "points "); ok {
			return strings.Fields(rest)
		}
	}
	panic("scheduler_plugins.txt has no points line")
})

var schedulerPluginTable = sync.OnceValue(func() map[string]schedulerPluginInfo {
	t := map[string]schedulerPluginInfo{}
	for _, line := range strings.Split(schedulerPluginsFile, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "points "):
		case strings.HasPrefix(line, "removed "):
			name, repl, _ := strings.Cut(strings.TrimPrefix(line, "removed "), ": ")
			t[name] = schedulerPluginInfo{removed: repl}
		default:
			f := strings.Fields(line)
			info := schedulerPluginInfo{}
			if f[0] == "hactl" {
				info.hactl, f = true, f[1:]
			}
			info.points = f[1:]
			t[f[0]] = info
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
// Plugins fields, the "points" line of scheduler_plugins.txt), in the v1 type's order.
func SchedulerExtensionPoints() []string {
	return slices.Clone(schedulerPoints())
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

// imageRefRE is an image reference as github.com/distribution/reference's grammar has it (domain
// with optional port, lower-case path components, optional tag of at most 128 characters, optional
// sha256 digest), anchored.
var imageRefRE = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?` +
	`[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*` +
	`(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

// IsImageReference reports whether ref is an image reference by that grammar.
func IsImageReference(ref string) bool { return imageRefRE.MatchString(ref) }

// schedulerBindAddresses are the addresses one static-pod manifest can bind on every host.
var schedulerBindAddresses = []string{"127.0.0.1", "0.0.0.0", "::1", "::"}

// ProbeHost is the address kubelet probes a static pod bound to s.BindAddress at: loopback of the
// same family.
func (s *Scheduler) ProbeHost() string {
	if strings.Contains(s.BindAddress, ":") {
		return "::1"
	}
	return "127.0.0.1"
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
	if s.Image != "" && !imageRefRE.MatchString(s.Image) {
		v.add(field.Invalid(p.Child("image"), s.Image, "an image reference [REGISTRY[:PORT]/]PATH[:TAG][@sha256:DIGEST] in lower case, e.g. ghcr.io/hactl/hactl-scheduler:v0.1.0"))
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
	v.add(checkSchedulerPort(c, p.Child("securePort"), s.SecurePort))
	if !slices.Contains(schedulerBindAddresses, s.BindAddress) {
		v.add(field.NotSupported(p.Child("bindAddress"), s.BindAddress, schedulerBindAddresses))
	}
	v.add(checkQualifiedName(p.Child("topologyKey"), s.TopologyKey)...)
	v.add(checkQualifiedName(p.Child("maintenanceLabel"), s.MaintenanceLabel)...)
	if s.ZonePreferenceWeight < 1 {
		v.add(field.Invalid(p.Child("zonePreferenceWeight"), s.ZonePreferenceWeight, "a score weight is at least 1"))
	}
	v.add(checkPreferredZones(c, p.Child("preferredZones"), s.PreferredZones)...)
	v.add(checkBinPacking(p.Child("binPacking"), s.BinPacking)...)
	if n := s.PercentageOfNodesToScore; n != nil && (*n < 0 || *n > 100) {
		v.add(field.Invalid(p.Child("percentageOfNodesToScore"), *n, "a percentage, 0-100 (0: kube-scheduler's adaptive default)"))
	}
	leaseNamed := slices.Contains(forbiddenLeaseNames, s.SchedulerName) && s.LeaderElection.ResourceName == s.SchedulerName
	if leaseNamed {
		// The Lease's name defaults to the schedulerName: say so where the user wrote it.
		v.add(field.Invalid(p.Child("schedulerName"), s.SchedulerName, "the Lease is named after the schedulerName by default, and that Lease belongs to Kubernetes' own component: name hactl-scheduler's profile otherwise, e.g. hactl-scheduler, or set leaderElection.resourceName"))
	}
	v.add(checkLeaderElection(p.Child("leaderElection"), &s.LeaderElection, leaseNamed)...)
	v.schedulerPlugins(p.Child("plugins"), s)
}

// checkQualifiedName checks the Kubernetes qualified name s at p (a label key: [PREFIX/]NAME,
// apimachinery's validation.IsQualifiedName): one Invalid error at p per broken rule, nil when none.
func checkQualifiedName(p *field.Path, s string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(s) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}

// checkSchedulerPort checks spec.scheduler.securePort at p: a TCP port of 1024 or more (the scheduler
// runs unprivileged) that none of the components beside the scheduler on c's control-plane hosts
// uses (SSH, etcd, kubelet, kube-proxy, the apiserver, the load balancer). It returns nil when the
// port is free, else an Invalid error at p.
func checkSchedulerPort(c *Cluster, p *field.Path, port int) *field.Error {
	if !validPort(port) {
		return field.Invalid(p, port, "a TCP port between 1 and 65535")
	}
	if port < 1024 {
		return field.Invalid(p, port, fmt.Sprintf("a port of 1024 or more: hactl-scheduler runs as a non-root user with every capability dropped, so it cannot bind a privileged port; e.g. %d", DefaultSchedulerSecurePort))
	}
	clash := kubePortClash(port)
	sshPort := c.Spec.SSH.Port
	for _, h := range c.Spec.Hosts {
		if h.Port == port {
			sshPort = port
		}
	}
	switch {
	case clash != "":
	case port == sshPort:
		clash = fmt.Sprintf("%d is an SSH port of the hosts", port)
	case port == c.Spec.Etcd.ClientPort || port == c.Spec.Etcd.PeerPort || port == limits.EtcdMetricsPort:
		clash = fmt.Sprintf("%d is an etcd port on the control planes that are members", port)
	case port == limits.KubeletHealthzPort || port == limits.KubeProxyMetricsPort || port == limits.KubeProxyHealthzPort:
		clash = fmt.Sprintf("%d is a kubelet or kube-proxy port on every node", port)
	case port == DefaultAPIServerPort || (c.Spec.LoadBalancer != nil && (port == c.Spec.LoadBalancer.APIServerPort || port == c.Spec.LoadBalancer.FrontendPort)):
		clash = fmt.Sprintf("%d is the kube-apiserver's or the load balancer's port", port)
	}
	if clash != "" {
		return field.Invalid(p, port, clash+fmt.Sprintf(": the scheduler runs on the control planes' host network; pick another, e.g. %d", DefaultSchedulerSecurePort))
	}
	return nil
}

// checkPreferredZones checks spec.scheduler.preferredZones at p: each names a zone of c's Kubernetes
// nodes (of every host without spec.kubernetes) once, with a weight 1-100. It returns the problems in
// list order (at p[i].zone, p[i].weight), nil when there are none.
func checkPreferredZones(c *Cluster, p *field.Path, zones []PreferredZone) field.ErrorList {
	var errs field.ErrorList
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
			errs = append(errs, field.Required(zp.Child("zone"), "a zone of the hosts, e.g. "+strings.Join(known, ", ")))
		case seen[z.Zone]:
			errs = append(errs, field.Duplicate(zp.Child("zone"), z.Zone))
		case len(hosts) > 0 && !have[z.Zone]:
			errs = append(errs, field.Invalid(zp.Child("zone"), z.Zone, fmt.Sprintf("no node of the spec is in this zone (zones: %s); a preference for it would never be met", strings.Join(known, ", "))))
		}
		seen[z.Zone] = true
		if z.Weight < 1 || z.Weight > 100 {
			errs = append(errs, field.Invalid(zp.Child("weight"), z.Weight, "a weight 1-100"))
		}
	}
	return errs
}

// checkBinPacking checks spec.scheduler.binPacking at p against NodeResourcesFit's rules: strategy
// MostAllocated or RequestedToCapacityRatio, resources named once with weights 1-100, and a shape
// (only with RequestedToCapacityRatio) of strictly increasing utilizations 0-100 with scores 0-10.
// It returns the problems in field order, nil when there are none.
func checkBinPacking(p *field.Path, b *BinPacking) field.ErrorList {
	var errs field.ErrorList
	switch b.Strategy {
	case BinPackingMostAllocated, BinPackingRequestedToCapacity:
	case "LeastAllocated":
		errs = append(errs, field.Invalid(p.Child("strategy"), b.Strategy, "LeastAllocated spreads pods, as kube-scheduler already does; hactl-scheduler packs: MostAllocated or RequestedToCapacityRatio"))
	default:
		errs = append(errs, field.NotSupported(p.Child("strategy"), b.Strategy, []string{BinPackingMostAllocated, BinPackingRequestedToCapacity}))
	}
	seen := map[string]bool{}
	for i, r := range b.Resources {
		rp := p.Child("resources").Index(i)
		switch {
		case r.Name == "":
			errs = append(errs, field.Required(rp.Child("name"), "a resource name, e.g. cpu, memory, nvidia.com/gpu"))
		case seen[r.Name]:
			errs = append(errs, field.Duplicate(rp.Child("name"), r.Name))
		}
		seen[r.Name] = true
		if r.Weight < 1 || r.Weight > 100 {
			errs = append(errs, field.Invalid(rp.Child("weight"), r.Weight, "a weight 1-100 (NodeResourcesFit's range)"))
		}
	}
	if len(b.Shape) > 0 && b.Strategy != BinPackingRequestedToCapacity {
		errs = append(errs, field.Forbidden(p.Child("shape"), "only with strategy RequestedToCapacityRatio"))
	}
	for i, pt := range b.Shape {
		sp := p.Child("shape").Index(i)
		if pt.Utilization < 0 || pt.Utilization > 100 {
			errs = append(errs, field.Invalid(sp.Child("utilization"), pt.Utilization, "a percentage, 0-100"))
		} else if i > 0 && pt.Utilization <= b.Shape[i-1].Utilization {
			errs = append(errs, field.Invalid(sp.Child("utilization"), pt.Utilization, "utilizations increase strictly"))
		}
		if pt.Score < 0 || pt.Score > 10 {
			errs = append(errs, field.Invalid(sp.Child("score"), pt.Score, "a score 0-10"))
		}
	}
	return errs
}

// checkLeaderElection checks spec.scheduler.leaderElection at p by client-go's rule
// (leaderelection.NewLeaderElector: leaseDuration > renewDeadline > JitterFactor 1.2 × retryPeriod,
// all positive; leaseDuration whole seconds, as the Lease stores it), keeps the Lease off the components' own (unless nameReported: the schedulerName it
// defaulted from was reported) and requires DNS-1123 resource and namespace names. It returns the
// problems in field order, nil when there are none.
func checkLeaderElection(p *field.Path, le *SchedulerLeaderElection, nameReported bool) field.ErrorList {
	var errs field.ErrorList
	ld, rd, rp := le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration
	for _, d := range []struct {
		name string
		d    Duration
	}{{"leaseDuration", le.LeaseDuration}, {"renewDeadline", le.RenewDeadline}, {"retryPeriod", le.RetryPeriod}} {
		if d.d.Duration <= 0 {
			errs = append(errs, field.Invalid(p.Child(d.name), d.d.String(), "a positive duration"))
		}
	}
	if ld > 0 && ld%time.Second != 0 {
		// client-go writes the Lease's leaseDurationSeconds as whole seconds (truncated), and the
		// followers wait that long, not the duration given.
		errs = append(errs, field.Invalid(p.Child("leaseDuration"), le.LeaseDuration.String(), fmt.Sprintf("must be whole seconds: the Lease records leaseDurationSeconds and the followers wait %s, not %s (client-go truncates); e.g. 15s", ld.Truncate(time.Second), ld)))
	}
	if ld > 0 && rd > 0 && rp > 0 {
		if ld <= rd {
			errs = append(errs, field.Invalid(p.Child("leaseDuration"), le.LeaseDuration.String(), fmt.Sprintf("must be greater than renewDeadline (%s): followers would take over while the leader still renews (client-go refuses it)", le.RenewDeadline)))
		}
		if float64(rd) <= 1.2*float64(rp) {
			errs = append(errs, field.Invalid(p.Child("renewDeadline"), le.RenewDeadline.String(), fmt.Sprintf("must be greater than 1.2 x retryPeriod (%s, client-go's JitterFactor): the leader could not retry a renewal before its deadline (client-go refuses it, and kube-scheduler exits)", le.RetryPeriod)))
		}
	}
	switch msgs := validation.IsDNS1123Subdomain(le.ResourceName); {
	case nameReported:
	case slices.Contains(forbiddenLeaseNames, le.ResourceName):
		errs = append(errs, field.Invalid(p.Child("resourceName"), le.ResourceName, "that Lease belongs to Kubernetes' own component: two schedulers on one Lease would take turns with it; keep hactl-scheduler's own (default: the schedulerName)"))
	case len(msgs) > 0:
		errs = append(errs, field.Invalid(p.Child("resourceName"), le.ResourceName, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(le.ResourceNamespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("resourceNamespace"), le.ResourceNamespace, strings.Join(msgs, "; ")))
	}
	return errs
}

// schedulerPlugins checks spec.scheduler.plugins against scheduler_plugins.txt: known names, each
// enabled at an extension point it implements, weights at score only, exactly one queueSort plugin in
// the result (kube-scheduler's rule), and hactl's own plugins and binder left to spec.scheduler's
// settings (enabling them again or disabling them would be refused or silently ignored by the
// scheduler).
func (v *validator) schedulerPlugins(p *field.Path, s *Scheduler) {
	points := SchedulerExtensionPoints()
	own := s.HactlSchedulerPlugins()
	keys := make([]string, 0, len(s.Plugins))
	for k := range s.Plugins {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	table := schedulerPluginTable()
	queueSort := map[string]bool{"PrioritySort": true} // kube-scheduler's default profile
	for _, point := range keys {
		pp := p.Key(point)
		if !slices.Contains(points, point) {
			v.add(field.NotSupported(pp, point, points))
			continue
		}
		set := s.Plugins[point]
		enabled := map[string]bool{}
		for i, pl := range set.Enabled {
			ep := pp.Child("enabled").Index(i)
			if e := checkPluginName(ep.Child("name"), pl.Name, table, false); e != nil {
				v.add(e)
				continue
			}
			info := table[pl.Name]
			switch {
			case enabled[pl.Name]:
				e := field.Duplicate(ep.Child("name"), pl.Name)
				e.Detail = "enabled twice at this extension point"
				v.add(e)
			case pl.Name == "ZonePreference" && len(s.PreferredZones) == 0:
				v.add(field.Invalid(ep.Child("name"), pl.Name, "hactl enables ZonePreference at score when spec.scheduler.preferredZones is set (its args); set preferredZones instead"))
			case info.hactl:
				v.add(field.Invalid(ep.Child("name"), pl.Name, fmt.Sprintf("hactl enables its own plugin itself (%s); remove it here", ownPoints(own, pl.Name))))
			case pl.Name == "DefaultBinder" && (point == "bind" || point == "multiPoint"):
				v.add(field.Invalid(ep.Child("name"), pl.Name, "RecordingBinder binds in its place (it records the binding replica on the Binding, which the Lease drill reads); remove it here"))
			case point != "multiPoint" && !slices.Contains(info.points, point):
				v.add(field.Invalid(ep.Child("name"), pl.Name, fmt.Sprintf("does not implement %s (its extension points: %s); kube-scheduler would refuse the profile", point, strings.Join(info.points, ", "))))
			}
			enabled[pl.Name] = true
			if point == "queueSort" || (point == "multiPoint" && slices.Contains(info.points, "queueSort")) {
				queueSort[pl.Name] = true
			}
			if pl.Weight != nil {
				switch {
				case point != "score" && point != "multiPoint" && point != "placementScore":
					v.add(field.Forbidden(ep.Child("weight"), "a weight is for the score extension point only"))
				case point == "multiPoint" && !slices.Contains(info.points, "score") && !slices.Contains(info.points, "placementScore"):
					v.add(field.Forbidden(ep.Child("weight"), fmt.Sprintf("%s does not score (its extension points: %s): kube-scheduler would ignore this weight; remove it", pl.Name, strings.Join(info.points, ", "))))
				case *pl.Weight < 1:
					v.add(field.Invalid(ep.Child("weight"), *pl.Weight, "a score weight is at least 1 (0 or less would cancel or invert the plugin's score)"))
				}
			}
		}
		for i, pl := range set.Disabled {
			dp := pp.Child("disabled").Index(i).Child("name")
			if e := checkPluginName(dp, pl.Name, table, true); e != nil {
				v.add(e)
				continue
			}
			if enabled[pl.Name] {
				v.add(field.Invalid(dp, pl.Name, fmt.Sprintf("also enabled at %s: kube-scheduler would run it there and ignore this entry; keep one of the two", point)))
			}
			if table[pl.Name].hactl {
				v.add(field.Invalid(dp, pl.Name, "hactl's own plugin is not disabled here (the scheduler would ignore it): "+hactlPluginOff[pl.Name]))
			}
			if (point == "queueSort" || point == "multiPoint") && (pl.Name == "*" || pl.Name == "PrioritySort") {
				delete(queueSort, "PrioritySort")
			}
		}
	}
	v.add(checkPluginWeightsAcrossPoints(p, s)...)
	if len(queueSort) != 1 {
		names := slices.Sorted(maps.Keys(queueSort))
		v.add(field.Invalid(p.Key("queueSort"), strings.Join(names, ", "), "a profile has exactly one queueSort plugin (kube-scheduler's rule; the default is PrioritySort)"))
	}
}

// scoringPoints are the extension points where a plugin's weight counts (KubeSchedulerConfiguration
// v1: "Weight is used only for Score and PlacementScore plugins").
var scoringPoints = []string{"score", "placementScore"}

// checkPluginWeightsAcrossPoints checks what the scheduler framework would do with a plugin s.Plugins
// enables at multiPoint and again at a point it expands to (frameworkImpl.expandMultiPointPlugins:
// the specific point's entry overrides multiPoint's there; getValidScoreWeights: its weight wins,
// no weight counting as 1), and with a multiPoint weight of a plugin that will not score. Enabling a
// plugin at several specific points, or at multiPoint and again at a point without weights, is the
// framework's documented use and passes; each case below would drop a weight the spec gives:
//   - at multiPoint with weight W and at score (or placementScore) with another weight, or none
//     (which is 1): the framework scores with the specific entry's weight and drops W;
//   - at multiPoint with a weight while that point is disabled for it (disabled by name or "*"
//     there, or, for NodeResourcesBalancedAllocation, by hactl at score): it never scores there;
//   - NodeResourcesBalancedAllocation at multiPoint but not at score: hactl disables it at score (it
//     spreads), so multiPoint would enable it at preScore only.
//
// It returns the problems at p[point].enabled[i] (.weight or .name), nil when there are none.
func checkPluginWeightsAcrossPoints(p *field.Path, s *Scheduler) field.ErrorList {
	var errs field.ErrorList
	table := schedulerPluginTable()
	for i, mp := range s.Plugins["multiPoint"].Enabled {
		info, ok := table[mp.Name]
		if !ok || info.removed != "" {
			continue // reported by schedulerPlugins
		}
		mpp := p.Key("multiPoint").Child("enabled").Index(i)
		atScore := slices.ContainsFunc(s.Plugins["score"].Enabled, func(e SchedulerPlugin) bool { return e.Name == mp.Name })
		if mp.Name == "NodeResourcesBalancedAllocation" && !atScore {
			errs = append(errs, field.Invalid(mpp.Child("name"), mp.Name, "hactl disables NodeResourcesBalancedAllocation at score (it spreads pods, against binPacking), so multiPoint would enable it at preScore only; enable it at score (and preScore) instead if it is to score"))
			continue
		}
		if mp.Weight == nil {
			continue
		}
		for _, point := range scoringPoints {
			if !slices.Contains(info.points, point) {
				continue
			}
			set := s.Plugins[point]
			if slices.ContainsFunc(set.Disabled, func(d SchedulerPlugin) bool { return d.Name == mp.Name || d.Name == "*" }) {
				errs = append(errs, field.Invalid(mpp.Child("weight"), *mp.Weight, fmt.Sprintf("%s is disabled at %s (plugins[%s].disabled), so it never scores there and kube-scheduler ignores this weight; remove the weight or that entry", mp.Name, point, point)))
				continue
			}
			j := slices.IndexFunc(set.Enabled, func(e SchedulerPlugin) bool { return e.Name == mp.Name })
			if j < 0 {
				continue
			}
			w := int32(1) // the framework's weight for an entry without one
			if set.Enabled[j].Weight != nil {
				w = *set.Enabled[j].Weight
			}
			if w != *mp.Weight {
				errs = append(errs, field.Invalid(p.Key(point).Child("enabled").Index(j).Child("weight"), w, fmt.Sprintf("%s is enabled at multiPoint with weight %d too: kube-scheduler scores it at %s with this entry's weight (%d; none is 1) and drops multiPoint's; give one weight, here or at multiPoint, and remove the other entry", mp.Name, *mp.Weight, point, w)))
			}
		}
	}
	return errs
}

// hactlPluginOff says how each of hactl's plugins is turned off, since plugins cannot.
var hactlPluginOff = map[string]string{
	"ZonePreference":   "it runs only with spec.scheduler.preferredZones; remove those to turn it off",
	"MaintenanceGuard": "it only keeps pods off nodes marked for maintenance; end the maintenance with `hactl maintenance end NODE`",
	"RecordingBinder":  "it is hactl-scheduler's binder (DefaultBinder's binding plus the binding replica's identity)",
}

func ownPoints(own map[string][]string, name string) string {
	for point, names := range own {
		if slices.Contains(names, name) {
			return "at " + point
		}
	}
	return "from spec.scheduler's settings"
}

// checkPluginName checks the plugin name at p against table (scheduler_plugins.txt): it returns a
// Required (empty), NotSupported (unknown) or Invalid (removed from Kubernetes) error at p, or nil
// for a known plugin, and for "*" (all defaults) when disabling.
func checkPluginName(p *field.Path, name string, table map[string]schedulerPluginInfo, disabling bool) *field.Error {
	info, ok := table[name]
	switch {
	case name == "":
		return field.Required(p, "a plugin name")
	case name == "*" && disabling:
		return nil
	case !ok:
		return field.NotSupported(p, name, SchedulerPluginNames())
	case info.removed != "":
		return field.Invalid(p, name, "removed from Kubernetes; use "+info.removed)
	}
	return nil
}
