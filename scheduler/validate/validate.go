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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	_ "github.com/hactl/hactl/scheduler/apis/config/scheme" // hactl's plugin args in kube-scheduler's scheme
)

// File loads the KubeSchedulerConfiguration at path and checks it as described in the package doc,
// with outOfTree (hactl's plugins) next to the in-tree registry. It returns the loaded configuration
// and nil when every check passes, else an error: the decoder's (with the field), the validation's
// aggregate (field paths such as profiles[0].plugins.score.enabled[1]), the leader-election rule
// broken, or the first framework that could not be built (plugin name, args error).
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
	if _, err := frameworks(ctx, cfg, outOfTree); err != nil {
		return nil, err
	}
	return cfg, nil
}

// leaderElection applies client-go's NewLeaderElector checks (leaseDuration > renewDeadline >
// 1.2 × retryPeriod, all > 0) to cfg's timings, naming the fields.
func leaderElection(cfg *schedconfig.KubeSchedulerConfiguration) error {
	le := cfg.LeaderElection
	if !le.LeaderElect {
		return nil
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
