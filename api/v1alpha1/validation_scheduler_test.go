package v1alpha1

import (
	"strings"
	"testing"
	"time"
)

// schedCluster returns kubeCluster with a defaulted spec.scheduler preferring az-a, then mutated.
func schedCluster(mutate func(s *Scheduler)) *Cluster {
	c := kubeCluster(func(c *Cluster) {
		c.Spec.Scheduler = &Scheduler{PreferredZones: []PreferredZone{{Zone: "az-a", Weight: 100}}}
	})
	if mutate != nil {
		mutate(c.Spec.Scheduler)
	}
	return c
}

func TestSchedulerDefaults(t *testing.T) {
	s := schedCluster(nil).Spec.Scheduler
	le := s.LeaderElection
	if s.SchedulerName != "hactl-scheduler" || s.Replicas != 3 || s.SecurePort != 10261 || s.ZonePreferenceWeight != 5 ||
		s.BinPacking.Strategy != "MostAllocated" || len(s.BinPacking.Resources) != 2 || le.LeaseDuration.Duration != 15*time.Second ||
		le.RenewDeadline.Duration != 10*time.Second || le.RetryPeriod.Duration != 2*time.Second ||
		le.ResourceName != "hactl-scheduler" || le.ResourceNamespace != "kube-system" || s.MaintenanceLabel != "hactl.io/maintenance" {
		t.Fatalf("defaults: %+v (leader election %+v)", s, le)
	}
	if errs, _ := Validate(schedCluster(nil), nil); len(errs) > 0 {
		t.Fatalf("valid spec: %v", errs)
	}
}

func TestSchedulerInvalid(t *testing.T) {
	w := func(n int32) *int32 { return &n }
	for name, tc := range map[string]struct {
		mutate func(s *Scheduler)
		path   string
		msg    string
	}{
		"profile default-scheduler": {func(s *Scheduler) { s.SchedulerName = "default-scheduler" }, "spec.scheduler.schedulerName", "kube-scheduler's own profile"},
		"profile kube-scheduler": {func(s *Scheduler) {
			s.SchedulerName, s.LeaderElection.ResourceName = "kube-scheduler", "kube-scheduler"
		}, "spec.scheduler.schedulerName", "named after the schedulerName"},
		"lease kube-scheduler":     {func(s *Scheduler) { s.LeaderElection.ResourceName = "kube-scheduler" }, "spec.scheduler.leaderElection.resourceName", "Kubernetes' own component"},
		"lease <= renew":           {func(s *Scheduler) { s.LeaderElection.LeaseDuration.Duration = 10 * time.Second }, "spec.scheduler.leaderElection.leaseDuration", "greater than renewDeadline"},
		"renew <= 1.2 retry":       {func(s *Scheduler) { s.LeaderElection.RetryPeriod.Duration = 9 * time.Second }, "spec.scheduler.leaderElection.renewDeadline", "1.2 x retryPeriod"},
		"lease 15.5s":              {func(s *Scheduler) { s.LeaderElection.LeaseDuration.Duration = 15500 * time.Millisecond }, "spec.scheduler.leaderElection.leaseDuration", "whole seconds: the Lease records leaseDurationSeconds and the followers wait 15s, not 15.5s"},
		"negative retry":           {func(s *Scheduler) { s.LeaderElection.RetryPeriod.Duration = -time.Second }, "spec.scheduler.leaderElection.retryPeriod", "positive"},
		"zone nobody has":          {func(s *Scheduler) { s.PreferredZones[0].Zone = "az-x" }, "spec.scheduler.preferredZones[0].zone", "no node of the spec is in this zone (zones: az-a, az-b, az-c)"},
		"zone weight 0":            {func(s *Scheduler) { s.PreferredZones[0].Weight = 0 }, "spec.scheduler.preferredZones[0].weight", "1-100"},
		"zone twice":               {func(s *Scheduler) { s.PreferredZones = append(s.PreferredZones, PreferredZone{"az-a", 5}) }, "spec.scheduler.preferredZones[1].zone", "Duplicate"},
		"percentage 101":           {func(s *Scheduler) { s.PercentageOfNodesToScore = w(101) }, "spec.scheduler.percentageOfNodesToScore", "0-100"},
		"percentage -1":            {func(s *Scheduler) { s.PercentageOfNodesToScore = w(-1) }, "spec.scheduler.percentageOfNodesToScore", "0-100"},
		"replicas > nodes":         {func(s *Scheduler) { s.Replicas = 7 }, "spec.scheduler.replicas", "6 Kubernetes node(s)"},
		"port of kube-scheduler":   {func(s *Scheduler) { s.SecurePort = 10259 }, "spec.scheduler.securePort", "kube-scheduler's port"},
		"port of etcd":             {func(s *Scheduler) { s.SecurePort = 2379 }, "spec.scheduler.securePort", "etcd port"},
		"least allocated":          {func(s *Scheduler) { s.BinPacking.Strategy = "LeastAllocated" }, "spec.scheduler.binPacking.strategy", "spreads"},
		"resource weight 0":        {func(s *Scheduler) { s.BinPacking.Resources[0].Weight = 0 }, "spec.scheduler.binPacking.resources[0].weight", "1-100"},
		"shape with MostAllocated": {func(s *Scheduler) { s.BinPacking.Shape = []UtilizationShapePoint{{0, 0}} }, "spec.scheduler.binPacking.shape", "only with strategy RequestedToCapacityRatio"},
		"unknown plugin": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"filter": {Enabled: []SchedulerPlugin{{Name: "NoSuchPlugin"}}}}
		}, "spec.scheduler.plugins[filter].enabled[0].name", "supported values"},
		"removed plugin": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"score": {Enabled: []SchedulerPlugin{{Name: "NodeResourcesMostAllocated"}}}}
		}, "spec.scheduler.plugins[score].enabled[0].name", "NodeResourcesFit with scoringStrategy MostAllocated"},
		"plugin twice": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"score": {Enabled: []SchedulerPlugin{{Name: "ImageLocality"}, {Name: "ImageLocality"}}}}
		}, "spec.scheduler.plugins[score].enabled[1].name", "enabled twice"},
		"hactl's plugin again": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"filter": {Enabled: []SchedulerPlugin{{Name: "MaintenanceGuard"}}}}
		}, "spec.scheduler.plugins[filter].enabled[0].name", "hactl enables its own plugin itself (at filter)"},
		"plugin off its extension point": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"score": {Enabled: []SchedulerPlugin{{Name: "NodePorts"}}}}
		}, "spec.scheduler.plugins[score].enabled[0].name", "does not implement score (its extension points: preFilter, filter)"},
		"ZonePreference without zones": {func(s *Scheduler) {
			s.PreferredZones = nil
			s.Plugins = map[string]PluginSet{"score": {Enabled: []SchedulerPlugin{{Name: "ZonePreference"}}}}
		}, "spec.scheduler.plugins[score].enabled[0].name", "set preferredZones instead"},
		"MaintenanceGuard disabled": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"filter": {Disabled: []SchedulerPlugin{{Name: "MaintenanceGuard"}}}}
		}, "spec.scheduler.plugins[filter].disabled[0].name", "hactl maintenance end"},
		"DefaultBinder back": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"bind": {Enabled: []SchedulerPlugin{{Name: "DefaultBinder"}}}}
		}, "spec.scheduler.plugins[bind].enabled[0].name", "RecordingBinder binds in its place"},
		"no queueSort": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"queueSort": {Disabled: []SchedulerPlugin{{Name: "*"}}}}
		}, "spec.scheduler.plugins[queueSort]", "exactly one queueSort plugin"},
		"bind address of a host": {func(s *Scheduler) { s.BindAddress = "10.0.0.11" }, "spec.scheduler.bindAddress", "supported values"},
		"privileged port":        {func(s *Scheduler) { s.SecurePort = 443 }, "spec.scheduler.securePort", "1024 or more"},
		"image with scheme":      {func(s *Scheduler) { s.Image = "https://ghcr.io/hactl/x:1" }, "spec.scheduler.image", "an image reference"},
		"image upper case":       {func(s *Scheduler) { s.Image = "ghcr.io/Hactl/x:1" }, "spec.scheduler.image", "an image reference"},
		"score weight 0": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"score": {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(0)}}}}
		}, "spec.scheduler.plugins[score].enabled[0].weight", "at least 1"},
		"score weight negative": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"score": {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(-2)}}}}
		}, "spec.scheduler.plugins[score].enabled[0].weight", "at least 1"},
		"weight off score": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"filter": {Enabled: []SchedulerPlugin{{Name: "NodePorts", Weight: w(2)}}}}
		}, "spec.scheduler.plugins[filter].enabled[0].weight", "score extension point only"},
		"unknown extension point": {func(s *Scheduler) {
			s.Plugins = map[string]PluginSet{"scoring": {}}
		}, "spec.scheduler.plugins[scoring]", "supported values"},
	} {
		t.Run(name, func(t *testing.T) {
			errs, _ := Validate(schedCluster(tc.mutate), nil)
			for _, e := range errs {
				if e.Field == tc.path && strings.Contains(e.Error(), tc.msg) {
					return
				}
			}
			t.Fatalf("errors %v, want one at %s containing %q", errs, tc.path, tc.msg)
		})
	}
}

func TestSchedulerExplicitZeros(t *testing.T) {
	doc := strings.Replace(string(ExampleSpec()), "  scheduler: null\n", "  scheduler: {zonePreferenceWeight: 0, replicas: 0}\n", 1)
	_, _, err := Decode([]byte(doc), "cluster.yaml", Dirs{Base: t.TempDir()}, nil)
	if err == nil || !strings.Contains(err.Error(), "spec.scheduler.zonePreferenceWeight") || !strings.Contains(err.Error(), "spec.scheduler.replicas") {
		t.Fatalf("explicit zeros: %v, want errors for spec.scheduler.zonePreferenceWeight and replicas", err)
	}
}

func TestSchedulerPortOnSSH(t *testing.T) {
	c := schedCluster(func(s *Scheduler) { s.SecurePort = 2222 })
	c.Spec.Hosts[0].Port = 2222
	errs, _ := Validate(c, nil)
	for _, e := range errs {
		if e.Field == "spec.scheduler.securePort" && strings.Contains(e.Error(), "SSH port") {
			return
		}
	}
	t.Fatalf("errors %v, want spec.scheduler.securePort on an SSH port", errs)
}

func TestSchedulerImageReferences(t *testing.T) {
	for _, ref := range []string{"hactl-scheduler", "ghcr.io/hactl/hactl-scheduler:v0.1.0", "localhost:5000/x/y:dev-1a2b",
		"registry.example.com/a__b/c-d.e@sha256:" + strings.Repeat("ab", 32), "ghcr.io/hactl/s:1@sha256:" + strings.Repeat("0", 64)} {
		if !imageRefRE.MatchString(ref) {
			t.Errorf("%s refused", ref)
		}
	}
	for _, ref := range []string{"a b", "ghcr.io/x:", "ghcr.io/x@sha256:12", ":tag", "x/-y", "x:" + strings.Repeat("t", 129)} {
		if imageRefRE.MatchString(ref) {
			t.Errorf("%s accepted", ref)
		}
	}
}

// TestSchedulerPluginsAcrossPoints: "enabled twice" as the scheduler framework means it
// (expandMultiPointPlugins, getValidScoreWeights): a weight the framework would drop is refused; a
// plugin at several points, or at multiPoint and again without a conflicting weight, is not.
func TestSchedulerPluginsAcrossPoints(t *testing.T) {
	w := func(n int32) *int32 { return &n }
	for name, tc := range map[string]struct {
		plugins map[string]PluginSet
		path    string // "" = valid
		msg     string
	}{
		"multiPoint weight 3, score weight 5": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(3)}}},
			"score":      {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(5)}}},
		}, "spec.scheduler.plugins[score].enabled[0].weight", "enabled at multiPoint with weight 3 too"},
		"multiPoint weight 3, score without weight": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(3)}}},
			"score":      {Enabled: []SchedulerPlugin{{Name: "ImageLocality"}}},
		}, "spec.scheduler.plugins[score].enabled[0].weight", "this entry's weight (1; none is 1) and drops multiPoint's"},
		"multiPoint weight on a plugin disabled at score": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "TaintToleration", Weight: w(4)}}},
			"score":      {Disabled: []SchedulerPlugin{{Name: "*"}}},
		}, "spec.scheduler.plugins[multiPoint].enabled[0].weight", "never scores there"},
		"multiPoint weight on a plugin that does not score": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "NodePorts", Weight: w(2)}}},
		}, "spec.scheduler.plugins[multiPoint].enabled[0].weight", "NodePorts does not score"},
		"NodeResourcesBalancedAllocation at multiPoint": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "NodeResourcesBalancedAllocation"}}},
		}, "spec.scheduler.plugins[multiPoint].enabled[0].name", "preScore only"},
		"enabled and disabled at one point": {map[string]PluginSet{
			"filter": {Enabled: []SchedulerPlugin{{Name: "NodePorts"}}, Disabled: []SchedulerPlugin{{Name: "NodePorts"}}},
		}, "spec.scheduler.plugins[filter].disabled[0].name", "also enabled at filter"},
		"twice at multiPoint": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "ImageLocality"}, {Name: "ImageLocality", Weight: w(2)}}},
		}, "spec.scheduler.plugins[multiPoint].enabled[1].name", "enabled twice"},
		// Valid: the framework's documented uses.
		"filter and score": {map[string]PluginSet{
			"filter": {Enabled: []SchedulerPlugin{{Name: "TaintToleration"}}},
			"score":  {Enabled: []SchedulerPlugin{{Name: "TaintToleration", Weight: w(4)}}},
		}, "", ""},
		"multiPoint without weight, score with one": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "ImageLocality"}}},
			"score":      {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(5)}}},
		}, "", ""},
		"multiPoint and score, the same weight": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(5)}}},
			"score":      {Enabled: []SchedulerPlugin{{Name: "ImageLocality", Weight: w(5)}}},
		}, "", ""},
		"multiPoint, disabled at filter": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "TaintToleration", Weight: w(4)}}},
			"filter":     {Disabled: []SchedulerPlugin{{Name: "TaintToleration"}}},
		}, "", ""},
		"placementScore weight": {map[string]PluginSet{
			"placementScore": {Enabled: []SchedulerPlugin{{Name: "PodGroupPodsCount", Weight: w(2)}}},
		}, "", ""},
		"NodeResourcesBalancedAllocation at multiPoint and score": {map[string]PluginSet{
			"multiPoint": {Enabled: []SchedulerPlugin{{Name: "NodeResourcesBalancedAllocation"}}},
			"score":      {Enabled: []SchedulerPlugin{{Name: "NodeResourcesBalancedAllocation", Weight: w(2)}}},
		}, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			errs, _ := Validate(schedCluster(func(s *Scheduler) { s.Plugins = tc.plugins }), nil)
			if tc.path == "" {
				if len(errs) > 0 {
					t.Fatalf("valid plugins refused: %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.path && strings.Contains(e.Error(), tc.msg) {
					return
				}
			}
			t.Fatalf("errors %v, want one at %s containing %q", errs, tc.path, tc.msg)
		})
	}
}
