// Package options holds hactl-operator's command-line options and their validation.
package options

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Options are the operator's flags.
type Options struct {
	// MetricsAddr and ProbeAddr are the metrics and health-probe listen addresses ("host:port",
	// ":8080"); "0" turns metrics off.
	MetricsAddr, ProbeAddr string
	// LeaderElect runs the reconcilers only in the replica holding the Lease
	// LeaderElectionNamespace/LeaderElectionID.
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// RequeuePeriod is how often an EtcdCluster is looked at again (the etcd cluster is outside
	// Kubernetes: nothing notifies the operator of its changes), with 10% jitter.
	RequeuePeriod time.Duration
	// EtcdDialTimeout and EtcdRequestTimeout bound each connection to and request of a member.
	EtcdDialTimeout, EtcdRequestTimeout time.Duration
	// Namespace is the one namespace watched (its EtcdClusters, the Secrets they name): the
	// operator's RBAC is a Role there. "" watches every namespace (needs a ClusterRole).
	Namespace string
	// EtcdBinary is the etcd binary a heal installs on a spare (the image's; its version must be
	// the members').
	EtcdBinary string
}

// Defaults: kube-scheduler's leaseDuration and renewDeadline (15s/10s) with a retryPeriod of 1s
// instead of its 2s: a candidate looks at the Lease every 1–2.2s (client-go jitters by 1.2), so a
// released Lease is taken in about a second (issue 15's goal: a graceful takeover under 2s) and an
// expired one within leaseDuration + about retryPeriod. The cost is the holder's renewal: one Lease
// update a second.
func Defaults() Options {
	return Options{
		MetricsAddr: ":8080", ProbeAddr: ":8081",
		LeaderElect: true, LeaderElectionID: "hactl-operator",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: time.Second,
		RequeuePeriod: 30 * time.Second, EtcdDialTimeout: 2 * time.Second, EtcdRequestTimeout: 3 * time.Second,
		EtcdBinary: "/usr/local/bin/etcd",
	}
}

// Bind registers the options as flags on fs, with o's values as defaults.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, `metrics listen address ("0" turns metrics off)`)
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "health probe (/healthz, /readyz) listen address")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "run the reconcilers only in the replica holding the Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "the Lease's namespace (default: the pod's)")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "the Lease's name")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a Lease is valid without renewal (leaseDuration)")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the holder retries renewing before it gives up leadership (renewDeadline)")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often candidates and the holder retry (retryPeriod)")
	fs.DurationVar(&o.RequeuePeriod, "requeue-period", o.RequeuePeriod, "how often each EtcdCluster is looked at again (10% jitter)")
	fs.DurationVar(&o.EtcdDialTimeout, "etcd-dial-timeout", o.EtcdDialTimeout, "bound on connecting to one member")
	fs.DurationVar(&o.EtcdRequestTimeout, "etcd-request-timeout", o.EtcdRequestTimeout, "bound on one request to a member")
	fs.StringVar(&o.EtcdBinary, "etcd-binary", o.EtcdBinary, "the etcd binary a heal installs on a spare (its version must be the members')")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, `the namespace watched (default $POD_NAMESPACE; "" with no POD_NAMESPACE: every namespace)`)
}

// Validate returns every problem, each naming its flag: listen addresses that are not host:port,
// a Lease name that is no DNS subdomain, timings client-go's leader elector refuses
// (leaderelection.NewLeaderElector: leaseDuration > renewDeadline > JitterFactor × retryPeriod,
// all positive; its own check is run, not a copy), a requeue period under 5 s or non-positive
// etcd timeouts.
func (o Options) Validate() error {
	var errs []error
	for flagName, addr := range map[string]string{"--metrics-bind-address": o.MetricsAddr, "--health-probe-bind-address": o.ProbeAddr} {
		if addr == "0" && flagName == "--metrics-bind-address" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w (want host:port, e.g. :8080)", flagName, addr, err))
		}
	}
	if o.LeaderElect {
		for _, msg := range validation.IsDNS1123Subdomain(o.LeaderElectionID) {
			errs = append(errs, fmt.Errorf("--leader-election-id %q: %s", o.LeaderElectionID, msg))
		}
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "validate", Name: "validate"},
			Client:     fake.NewClientset().CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "validate"},
		}
		_, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("--leader-elect-lease-duration %s, --leader-elect-renew-deadline %s, --leader-elect-retry-period %s: %w (client-go needs leaseDuration > renewDeadline > %.1f × retryPeriod)",
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod, err, leaderelection.JitterFactor))
		}
	}
	if o.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(o.Namespace) {
			errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, msg))
		}
	}
	if o.RequeuePeriod < 5*time.Second {
		errs = append(errs, fmt.Errorf("--requeue-period %s: at least 5s (each look asks every member)", o.RequeuePeriod))
	}
	if o.EtcdDialTimeout <= 0 || o.EtcdRequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--etcd-dial-timeout %s, --etcd-request-timeout %s: must be positive", o.EtcdDialTimeout, o.EtcdRequestTimeout))
	}
	return errors.Join(errs...)
}
