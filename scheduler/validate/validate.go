// Package validate is `hactl-scheduler validate --config FILE`: the configuration loaded exactly as a
// run of the scheduler would load it, and every check a run would make before it schedules a pod —
// kube-scheduler's strict decoding (unknown fields are errors) and defaulting, its
// ValidateKubeSchedulerConfiguration, client-go's leader-election timing rules (which kube-scheduler
// only meets when it starts electing), and the construction of every profile's framework with the
// real plugin registry, so unknown plugin names and invalid plugin args fail here too. Nothing is
// contacted: the framework is built against a fake clientset. It is to hactl-scheduler what
// `haproxy -c` is to HAProxy.
package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"sigs.k8s.io/yaml"

	_ "github.com/hactl/hactl/scheduler/apis/config/scheme" // hactl's plugin args in kube-scheduler's scheme
)

// File loads the KubeSchedulerConfiguration at path and checks it as described in the package doc,
// with outOfTree (hactl's plugins) next to the in-tree registry. It returns the loaded configuration
// and nil when every check passes, else an error: the decoder's (with the field), the validation's
// aggregate (field paths such as profiles[0].plugins.score.enabled[1]), the leader-election rule
// broken, the first framework that could not be built (plugin name, args error), or a setting the
// built frameworks silently do not use (dropped).
func File(ctx context.Context, path string, outOfTree frameworkruntime.Registry) (*schedconfig.KubeSchedulerConfiguration, error) {
	logger := klog.FromContext(ctx)
	cfg, err := options.LoadConfigFromFile(logger, path)
	if err != nil {
		return nil, err
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, err
	}
	if err := leaderElection(cfg); err != nil {
		return nil, err
	}
	sched, err := frameworks(ctx, cfg, outOfTree)
	if err != nil {
		return nil, err
	}
	if err := dropped(path, sched); err != nil {
		return nil, err
	}
	return cfg, nil
}

// dropped reads the file at path as written (before kube-scheduler's defaulting merges its default
// plugins in) and returns what the frameworks built in sched would silently not use, naming the
// fields: a plugin weight the file gives (at score, placementScore or multiPoint) that differs
// from the weight the framework scores the plugin with (expandMultiPointPlugins and
// getValidScoreWeights let the specific point's entry override multiPoint's, an entry without a
// weight counting as 1), a weight on a plugin that does not score in the profile, and a plugin both
// enabled and disabled at one extension point (the enabled entry wins). nil when nothing is dropped.
func dropped(path string, sched *scheduler.Scheduler) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var raw schedv1.KubeSchedulerConfiguration
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("reading %s again as written: %w", path, err)
	}
	var errs []error
	for i, prof := range raw.Profiles {
		if prof.Plugins == nil {
			continue
		}
		name := "default-scheduler"
		if prof.SchedulerName != nil {
			name = *prof.SchedulerName
		}
		fw, ok := sched.Profiles[name]
		if !ok {
			continue
		}
		built := fw.ListPlugins()
		scores := map[string]map[string]int32{"score": weights(built.Score), "placementScore": weights(built.PlacementScore)}
		pp := field.NewPath("profiles").Index(i).Child("plugins")
		for _, pt := range points(prof.Plugins) {
			enabled := map[string]bool{}
			for j, pl := range pt.set.Enabled {
				enabled[pl.Name] = true
				if pl.Weight == nil {
					continue
				}
				wp := pp.Child(pt.name, "enabled").Index(j).Child("weight")
				at := []string{pt.name}
				if pt.name == "multiPoint" {
					at = []string{"score", "placementScore"}
				}
				used := false
				for _, point := range at {
					w, ok := scores[point][pl.Name]
					if !ok {
						continue
					}
					used = true
					if w != *pl.Weight {
						errs = append(errs, field.Invalid(wp, *pl.Weight, fmt.Sprintf("%s scores at %s with weight %d (another entry's: the specific point's overrides multiPoint's, none counting as 1): this weight would be dropped; give the plugin one weight", pl.Name, point, w)))
					}
				}
				if !used && pt.name != "score" && pt.name != "placementScore" {
					errs = append(errs, field.Invalid(wp, *pl.Weight, fmt.Sprintf("%s does not score in this profile: the framework ignores this weight; remove it", pl.Name)))
				}
			}
			for j, pl := range pt.set.Disabled {
				if enabled[pl.Name] {
					errs = append(errs, field.Invalid(pp.Child(pt.name, "disabled").Index(j), pl.Name, fmt.Sprintf("also enabled at %s: the framework runs it there and ignores this entry; keep one of the two", pt.name)))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// weights returns the plugins of a built framework's extension point with their weights.
func weights(set schedconfig.PluginSet) map[string]int32 {
	m := map[string]int32{}
	for _, p := range set.Enabled {
		m[p.Name] = p.Weight
	}
	return m
}

// namedSet is one extension point of a v1 profile as written.
type namedSet struct {
	name string
	set  schedv1.PluginSet
}

// points returns p's extension points by their v1 field names.
func points(p *schedv1.Plugins) []namedSet {
	return []namedSet{{"preEnqueue", p.PreEnqueue}, {"queueSort", p.QueueSort}, {"preFilter", p.PreFilter}, {"filter", p.Filter},
		{"postFilter", p.PostFilter}, {"preScore", p.PreScore}, {"score", p.Score}, {"reserve", p.Reserve}, {"permit", p.Permit},
		{"preBind", p.PreBind}, {"bind", p.Bind}, {"postBind", p.PostBind}, {"multiPoint", p.MultiPoint},
		{"placementGenerate", p.PlacementGenerate}, {"placementScore", p.PlacementScore}, {"podGroupPostFilter", p.PodGroupPostFilter}}
}

// leaderElection applies client-go's NewLeaderElector checks (leaseDuration > renewDeadline >
// 1.2 × retryPeriod, all > 0) to cfg's timings, naming the fields, and refuses a leaseDuration that
// is not whole seconds (the Lease stores leaseDurationSeconds: followers would wait less).
func leaderElection(cfg *schedconfig.KubeSchedulerConfiguration) error {
	le := cfg.LeaderElection
	if !le.LeaderElect {
		return nil
	}
	if d := le.LeaseDuration.Duration; d%time.Second != 0 {
		// client-go writes leaseDurationSeconds truncated, and followers wait that long.
		return fmt.Errorf("leaderElection.leaseDuration %s: must be whole seconds: the Lease records leaseDurationSeconds and the followers wait %s (client-go truncates)", d, d.Truncate(time.Second))
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.ResourceNamespace, Name: le.ResourceName},
		Client:     fake.NewClientset().CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "validate"},
	}
	_, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leaderElection (leaseDuration %s, renewDeadline %s, retryPeriod %s): %w; client-go needs leaseDuration > renewDeadline > %.1f × retryPeriod",
			le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration, err, leaderelection.JitterFactor)
	}
	return nil
}

// frameworks builds the scheduler with cfg's profiles against a fake clientset, as a run would after
// loading: every plugin's factory runs with its args. It returns the scheduler built (its Profiles
// hold the frameworks).
func frameworks(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, outOfTree frameworkruntime.Registry) (*scheduler.Scheduler, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := fake.NewClientset()
	informers := scheduler.NewInformerFactory(client, 0, nil)
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), 0, "", nil)
	recorders := func(string) events.EventRecorderLogger { return events.NewFakeRecorder(100) }
	sched, err := scheduler.New(ctx, client, informers, dyn, recorders,
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(outOfTree),
		scheduler.WithExtenders(cfg.Extenders...),
		scheduler.WithParallelism(cfg.Parallelism),
	)
	if err != nil {
		return nil, fmt.Errorf("building the profiles' frameworks: %w", err)
	}
	return sched, nil
}

// Report writes what a valid configuration holds: one line per profile with its scheduler name and
// its enabled plugins per extension point.
func Report(w io.Writer, cfg *schedconfig.KubeSchedulerConfiguration) error {
	var errs []error
	for _, p := range cfg.Profiles {
		_, err := fmt.Fprintf(w, "profile %s: valid (leader election %t, lease %s/%s)\n", p.SchedulerName,
			cfg.LeaderElection.LeaderElect, cfg.LeaderElection.ResourceNamespace, cfg.LeaderElection.ResourceName)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
