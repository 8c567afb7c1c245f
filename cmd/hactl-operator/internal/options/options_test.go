package options

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"renew >= lease", func(o *Options) { o.RenewDeadline = 15 * time.Second }, "--leader-elect-renew-deadline 15s"},
		{"retry × 1.2 >= renew", func(o *Options) { o.RetryPeriod = 9 * time.Second }, "renewDeadline > 1.2 × retryPeriod"},
		{"zero lease", func(o *Options) { o.LeaseDuration = 0 }, "leaseDuration"},
		{"lease id", func(o *Options) { o.LeaderElectionID = "Hactl_Operator" }, "--leader-election-id"},
		{"metrics address", func(o *Options) { o.MetricsAddr = "8080" }, "--metrics-bind-address"},
		{"probe address", func(o *Options) { o.ProbeAddr = "" }, "--health-probe-bind-address"},
		{"requeue", func(o *Options) { o.RequeuePeriod = time.Second }, "--requeue-period"},
		{"etcd timeout", func(o *Options) { o.EtcdRequestTimeout = 0 }, "--etcd-request-timeout"},
	} {
		o := Defaults()
		tc.mutate(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	// Without leader election its timings are not judged; metrics can be off.
	o := Defaults()
	o.LeaderElect, o.RenewDeadline, o.MetricsAddr = false, time.Hour, "0"
	if err := o.Validate(); err != nil {
		t.Errorf("no leader election: %v", err)
	}
}
