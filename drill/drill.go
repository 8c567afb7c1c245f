// Package drill runs failover drills against a cluster hactl built: it takes down exactly the part
// that holds a role (the etcd leader, every host of an availability zone, the VIP holder's HAProxy
// or Keepalived), measures how long the control plane was unavailable while a workload runs, puts
// everything back, and proves that no acknowledged write was lost.
//
// A drill is: preflight (no leftovers of an earlier drill, every member healthy, no alarm), a plan
// shown and confirmed, then Count iterations of: workload and watchers started → fault applied on
// the target hosts (recorded first in a local journal and on the host, with an on-host deadman that
// puts the host back even if hactl dies) → held for Hold → put back → caught up → workload stopped
// and every acknowledged key read back. The system is always put back, also on error and on Ctrl-C
// (a fresh context is used for the put-back); what could not be put back is named in a
// *NotRestoredError.
package drill

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/exitcode"
)

// Kind is a drill.
type Kind string

const (
	// KillLeader takes down the etcd leader.
	KillLeader Kind = "kill-leader"
	// AZOutage takes down every member and LB host of one availability zone.
	AZOutage Kind = "az-outage"
	// LBFailover stops HAProxy or Keepalived on the VIP holder; with spec.loadBalancer.external it
	// cuts one backend's kube-apiserver off the user's load balancer instead.
	LBFailover Kind = "lb-failover"
)

// Method is how a host (or its etcd) is taken down.
type Method string

const (
	// MethodProcess: SIGKILL of the service over SSH, then the unit held stopped (so systemd's
	// Restart= does not hide the failure) until the put-back starts it again.
	MethodProcess Method = "process"
	// MethodHost: a user-supplied command run on this machine takes the whole host down
	// (--down-command, e.g. a cloud CLI or `docker kill`), another brings it back (--up-command).
	MethodHost Method = "host"
	// MethodNetwork: iptables on the host drops traffic: for kill-leader the member's peer and client
	// ports (a partitioned leader), for az-outage everything but SSH (an isolated zone).
	MethodNetwork Method = "network"
)

// Methods lists the methods in the order help texts show them.
var Methods = []Method{MethodProcess, MethodHost, MethodNetwork}

// ParseMethod returns the Method named s or an *InputError naming flag.
func ParseMethod(flag, s string) (Method, error) {
	for _, m := range Methods {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Methods))
	for i, m := range Methods {
		names[i] = string(m)
	}
	return "", &InputError{Err: fmt.Errorf("%s %q: unknown method: use one of %s", flag, s, strings.Join(names, ", "))}
}

// Component is what lb-failover stops on the VIP holder (or, with an external load balancer, on a
// backend).
type Component string

const (
	// ComponentHAProxy stops haproxy.service: Keepalived's check fails and lowers the priority (or
	// goes to FAULT with checkWeight 0), so a backup takes the VIP over.
	ComponentHAProxy Component = "haproxy"
	// ComponentKeepalived stops keepalived.service: it sends a priority-0 advertisement on the way
	// out (RFC 5798 §6.4.3) and the backup takes over after its skew time.
	ComponentKeepalived Component = "keepalived"
	// ComponentAPIServer is lb-failover's only component with spec.loadBalancer.external: iptables
	// on one control-plane host (--backend) drops TCP to and from apiServerPort, so the user's load
	// balancer loses that backend the way it loses a dead host (no RST, connections time out).
	ComponentAPIServer Component = "kube-apiserver"
)

// Unit returns the systemd unit of c.
func (c Component) Unit() string { return string(c) + ".service" }

// ParseComponent returns the Component named s ("" stays "": Options.Validate picks the default)
// or an *InputError naming flag.
func ParseComponent(flag, s string) (Component, error) {
	switch Component(s) {
	case "", ComponentHAProxy, ComponentKeepalived, ComponentAPIServer:
		return Component(s), nil
	}
	return "", &InputError{Err: fmt.Errorf("%s %q: unknown component: use haproxy or keepalived (hactl's load balancer), or kube-apiserver (spec.loadBalancer.external)", flag, s)}
}

// Defaults of the workload and the measurement.
const (
	// DefaultRate is the workload's puts per second (one every 20 ms: the RTO's resolution).
	DefaultRate = 50
	// DefaultRequestTimeout is each workload request's deadline, so a client timeout never inflates
	// the figures.
	DefaultRequestTimeout = 100 * time.Millisecond
	// DefaultHold is how long the fault is held before the put-back.
	DefaultHold = 10 * time.Second
	// PollInterval is how often every member's status (leader, term, raft indexes) and the readyz
	// endpoint are asked: the measurement's resolution.
	PollInterval = 20 * time.Millisecond
	// DefaultDeadmanGrace is added to the hold for the on-host deadman: a host whose put-back did not
	// come (hactl killed) puts itself back this long after the hold ended.
	DefaultDeadmanGrace = 2 * time.Minute
	// warmup is how long the workload runs before the fault, and settle how long it keeps running
	// after the member caught up.
	warmup = time.Second
	settle = time.Second
)

// InputError is invalid input found locally, before any host is contacted (exit 2).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ExitCode is 2: the input is invalid (exitcode.Invalid).
func (e *InputError) ExitCode() int { return exitcode.Invalid }

// RefusedError is a drill refused by its preflight on the hosts: a member unhealthy, an alarm, the
// leftovers of an earlier drill (exit 3: a check's verdict). Fix says what to do.
type RefusedError struct {
	Reasons []string
	Fix     string
}

func (e *RefusedError) Error() string {
	return "drill refused: " + strings.Join(e.Reasons, "; ") + ": " + e.Fix
}

// ExitCode is 3: the preflight's verdict failed (exitcode.Verdict).
func (e *RefusedError) ExitCode() int { return exitcode.Verdict }

// VerdictError is a drill that ran and failed its verdict: an acknowledged write lost, a stale
// read, a split brain, an RTO over --max-rto, a prediction not met (exit 3). The report is written
// before it is returned.
type VerdictError struct{ Failures []string }

func (e *VerdictError) Error() string {
	return "drill failed: " + strings.Join(e.Failures, "; ")
}

// ExitCode is 3: the drill's verdict failed (exitcode.Verdict).
func (e *VerdictError) ExitCode() int { return exitcode.Verdict }

// NotRestoredError names what a drill (or drill cleanup) could not put back, host by host, and how
// to do it by hand. It wraps the put-back errors.
type NotRestoredError struct {
	// Left is one line per thing left broken, e.g. "cp-b: etcd.service is not running: systemctl start etcd".
	Left []string
	Err  error
}

func (e *NotRestoredError) Error() string {
	return "NOT PUT BACK — " + strings.Join(e.Left, "; ") + " (then run `hactl drill cleanup --yes`): " + errString(e.Err)
}
func (e *NotRestoredError) Unwrap() error { return e.Err }

func errString(err error) string {
	if err == nil {
		return "no further error"
	}
	return err.Error()
}

// IsInput reports whether err is (or wraps) an *InputError.
func IsInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}
