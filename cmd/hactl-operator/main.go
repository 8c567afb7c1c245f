// Command hactl-operator watches hactl-built etcd clusters from inside Kubernetes: one
// EtcdCluster per cluster (hactl.io/v1alpha1), its status and conditions kept true to the members,
// with Lease leader election among its replicas (only the leader reconciles). It is deployed by
// `hactl operator deploy`; see the README.
//
// Exit codes: 0 after a clean shutdown (SIGTERM: the Lease is released first), 1 when the manager
// fails, 2 for invalid flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hactl/hactl/cmd/hactl-operator/internal/controller"
	"github.com/hactl/hactl/cmd/hactl-operator/internal/options"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func main() {
	o := options.Defaults()
	o.Namespace = os.Getenv("POD_NAMESPACE")
	fs := flag.NewFlagSet("hactl-operator", flag.ContinueOnError)
	o.Bind(fs)
	zo := zap.Options{}
	zo.BindFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "hactl-operator: invalid flags:\n%v\n", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zo)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "hactl-operator stopped")
		os.Exit(1)
	}
}

// version is the module version and VCS revision the binary was built from ("hactl-operator
// (devel)" without build information), recorded in the snapshots' metadata.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "hactl-operator (devel)"
	}
	v := "hactl-operator " + bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}

func run(o options.Options) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := hactlv1.AddToScheme(scheme); err != nil {
		return err
	}
	lease, renew, retry := o.LeaseDuration, o.RenewDeadline, o.RetryPeriod
	opts := ctrl.Options{
		Scheme: scheme,
		// Secrets are read one by one (RBAC: get on the named Secret only), never cached.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // the next replica takes over at once on a clean stop
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
	}
	if o.Namespace != "" {
		opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	r := &controller.EtcdClusterReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hactl-operator"),
		RequeuePeriod: o.RequeuePeriod, DialTimeout: o.EtcdDialTimeout, RequestTimeout: o.EtcdRequestTimeout,
		Version: version(), EtcdBinary: o.EtcdBinary,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("etcdcluster controller: %w", err)
	}
	sr := &controller.EtcdSnapshotReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hactl-operator"), Clusters: r}
	if err := sr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("etcdsnapshot controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
