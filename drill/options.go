package drill

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// Options configure a drill. Validate checks them locally; Run does the drill.
type Options struct {
	Cluster *v1alpha1.Cluster
	Kind    Kind
	// Method takes the target down (kill-leader, az-outage); Component is what lb-failover stops
	// (default haproxy; with spec.loadBalancer.external always ComponentAPIServer).
	Method    Method
	Component Component
	// Backend is the control-plane host lb-failover cuts off an external load balancer (default:
	// the first control-plane host in spec order); only with spec.loadBalancer.external.
	Backend string
	// Zone is az-outage's zone; ExpectOutage allows a zone whose loss breaks quorum (the drill then
	// measures the recovery after the zone returns).
	Zone         string
	ExpectOutage bool
	// Down and Up are --method host's commands, run on this machine for each target host.
	Down, Up *fault.HostCommand
	// Hold is how long the fault is held (default DefaultHold); Count how many iterations (>= 1).
	Hold  time.Duration
	Count int
	// MaxRTO (> 0) turns the report into a pass/fail verdict on every iteration's RTO.
	MaxRTO time.Duration
	// Rate and RequestTimeout configure the etcd workload (defaults DefaultRate, DefaultRequestTimeout).
	Rate           int
	RequestTimeout time.Duration
	// CAFile is the kube-apiserver CA for readyz through the VIP (default
	// spec.loadBalancer.healthCheck.caFile); required by lb-failover, optional for az-outage.
	CAFile string
	// DeadmanGrace is added to Hold for the on-host deadman (default DefaultDeadmanGrace).
	DeadmanGrace time.Duration
	// Force runs the drill even though preflight found the cluster unhealthy (never with leftovers).
	Force bool
	// DryRun stops after the plan.
	DryRun bool
	// Confirm asks whether to go ahead with the plan (nil: go ahead).
	Confirm func(question string) (bool, error)
	Printer *ui.Printer
	// Dialer is the SSH dialer (known_hosts verified); EtcdDial routes etcd connections (a bastion
	// tunnel), nil for direct ones. With Dialer nil, Run opens one from the spec (provision.FromSpec,
	// asking Prompt for secrets) and, with a bastion, routes etcd through it.
	Dialer   *provision.Dialer
	EtcdDial etcd.Option
	Prompt   provision.Prompter
	// Report, when set, is the file Run writes the JSON report to (atomically, Report.WriteFile)
	// once the report exists, also when the drill fails.
	Report string

	// The restore drill's: MaxRPO (default DefaultRestoreMaxRPO; MaxRTO defaults to
	// DefaultRestoreMaxRTO), how long the workload runs before the disaster (default
	// DefaultRestoreWarmup), and the snapshots.
	MaxRPO   time.Duration
	Warmup   time.Duration
	Restorer Restorer
	// Onto (--onto) is the spec of the cluster to rebuild on other hosts while the drilled
	// cluster's members are fenced (nil: restore in place); OntoFile its path, for messages.
	// KeepFenced leaves the drilled cluster's members fenced after the drill (a real failover);
	// by default they are unfenced and started again once the drill has measured.
	Onto       *v1alpha1.Cluster
	OntoFile   string
	KeepFenced bool
}

// Validate checks the options against the spec without contacting any host and returns an
// *InputError (exit 2) naming the flag or field and the fix.
func (o *Options) Validate() error {
	var k kindChecks = kindOf(o, nil)
	if k == nil {
		k = unknownKind(o.Kind)
	}
	if o.Report != "" {
		if err := CheckReportPath(o.Report); err != nil {
			return err
		}
	}
	if o.Count < 1 {
		return &InputError{Err: fmt.Errorf("--count %d: must be at least 1", o.Count)}
	}
	if o.Hold == 0 {
		o.Hold = DefaultHold
	}
	if o.Hold < 0 {
		return &InputError{Err: fmt.Errorf("--hold %s: must be a positive duration, e.g. 10s", o.Hold)}
	}
	if o.MaxRTO < 0 {
		return &InputError{Err: fmt.Errorf("--max-rto %s: must be a positive duration, e.g. 5s", o.MaxRTO)}
	}
	if err := k.checkFlags(o); err != nil {
		return err
	}
	if err := o.checkWorkload(); err != nil {
		return err
	}
	if err := k.checkSpec(o); err != nil {
		return err
	}
	if f := o.caFile(); f != "" {
		raw, err := os.ReadFile(f)
		if err != nil {
			return &InputError{Err: fmt.Errorf("--ca-file: %w", err)}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(raw) {
			return &InputError{Err: fmt.Errorf("--ca-file %s: no PEM certificate in it: give the cluster CA (/etc/kubernetes/pki/ca.crt on a control-plane host)", f)}
		}
	}
	// The hold must give the measured thing time to happen (an election, the VIP's move, a load
	// balancer's health check).
	need, what, err := k.minHold(o)
	if err != nil {
		return err
	}
	if need > 0 && o.Hold < need {
		return &InputError{Err: fmt.Errorf("--hold %s: shorter than %s = %s: the fault would be put back before it can be measured", o.Hold, what, need.Round(10*time.Millisecond))}
	}
	return nil
}

// checkWorkload checks (and defaults) the workload's flags, the deadman's grace and --method
// host's commands.
func (o *Options) checkWorkload() error {
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Rate < 1 || o.Rate > 1000 {
		return &InputError{Err: fmt.Errorf("--rate %d: must be between 1 and 1000 puts per second", o.Rate)}
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.RequestTimeout < 0 {
		return &InputError{Err: fmt.Errorf("--request-timeout %s: must be positive, e.g. 100ms", o.RequestTimeout)}
	}
	if o.DeadmanGrace == 0 {
		o.DeadmanGrace = DefaultDeadmanGrace
	}
	if o.Method == MethodHost && (o.Down == nil || o.Up == nil) {
		return &InputError{Err: errors.New("--method host needs --down-command and --up-command (Go templates run on this machine, e.g. --down-command 'virsh destroy {{.Host}}' --up-command 'virsh start {{.Host}}'; fields .Host, .Address, .Zone)")}
	}
	if o.Method != MethodHost && (o.Down != nil || o.Up != nil) {
		return &InputError{Err: fmt.Errorf("--down-command and --up-command are for --method host (the method is %s)", o.Method)}
	}
	return nil
}

// caFile is --ca-file, else spec.loadBalancer.healthCheck.caFile.
func (o *Options) caFile() string {
	if o.CAFile != "" {
		return o.CAFile
	}
	if lbs := o.Cluster.Spec.LoadBalancer; lbs != nil {
		return lbs.HealthCheck.CAFile
	}
	return ""
}
