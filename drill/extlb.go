package drill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/lb"
)

// lb-failover with spec.loadBalancer.external: hactl runs no load balancer, so there is no VIP
// holder to take down. What the user's load balancer must survive is a backend that dies, and that
// is what this drill does: iptables on one control-plane host (--backend) drops TCP to and from
// kube-apiserver's port, the way a dead host looks to a load balancer (no RST: connections time
// out), while GET /readyz is asked through the load balancer every PollInterval on fresh
// connections. Measured: failed requests, and the time from the fault until requests stopped
// failing (the RTO): how long the load balancer kept sending clients to the dead backend.

// minExternalHold is the shortest --hold of lb-failover through an external load balancer: hactl
// does not know its health checks' timing, and a hold shorter than one second or so measures
// nothing a load balancer can react to.
const minExternalHold = 2 * time.Second

// backendCut is lb-failover with spec.loadBalancer.external.
type backendCut struct {
	*env
	faults *faulter
}

// newBackendCut returns lb-failover through an external load balancer on e (nil: for
// Options.Validate only).
func newBackendCut(e *env) *backendCut {
	return &backendCut{env: e, faults: &faulter{env: e, atStart: true,
		text: func(v1alpha1.Host) string {
			return fmt.Sprintf("iptables drops TCP to and from kube-apiserver's port %d, in and out", e.c.APIServerPort())
		},
		of: func(v1alpha1.Host) fault.Fault { return fault.Fault{DropPorts: []int{e.c.APIServerPort()}} },
	}}
}

func (*backendCut) checkFlags(o *Options) error { return noRestoreFlags(o) }

func (*backendCut) minHold(*Options) (time.Duration, string, error) {
	return minExternalHold, "the minimum for a load balancer's health check", nil
}

func (k *backendCut) header(rep *Report)                             { rep.Component = k.o.Component }
func (*backendCut) vipHolder() vipNeed                               { return vipNone }
func (*backendCut) preflight(context.Context, *preflightState) error { return nil }

func (k *backendCut) plan(*preflightState) []string {
	out := append(k.externalPlan(), k.faults.holdPlan()...)
	if k.o.MaxRTO > 0 {
		return append(out, fmt.Sprintf("verdict: fail (exit 3) if requests through your load balancer fail for longer than %s, or still fail within %s of the put-back (the backend never taken out)", k.o.MaxRTO, minQuietBeforePut))
	}
	return append(out, fmt.Sprintf("verdict: fail (exit 3) if requests through your load balancer still fail within %s of the put-back (the backend never taken out); add --max-rto for a verdict on the RTO", minQuietBeforePut))
}

// checkSpec checks lb-failover's options with spec.loadBalancer.external (defaulting Component
// and Backend) and returns an *InputError naming the flag.
func (*backendCut) checkSpec(o *Options) error {
	c := o.Cluster
	switch o.Component {
	case "":
		o.Component = ComponentAPIServer
	case ComponentAPIServer:
	default:
		return &InputError{Err: fmt.Errorf("--component %s: spec.loadBalancer.external is set, so hactl runs no HAProxy or Keepalived to stop; lb-failover cuts a backend's kube-apiserver off your load balancer instead: drop --component (or use kube-apiserver)", o.Component)}
	}
	cps := c.ControlPlaneHosts()
	names := make([]string, len(cps))
	for i, h := range cps {
		names[i] = h.Name
	}
	if len(cps) < 2 {
		return &InputError{Err: fmt.Errorf("spec.hosts: %d control-plane host(s): lb-failover through your load balancer needs at least 2 (a backend to lose and one to fail over to)", len(cps))}
	}
	switch {
	case o.Backend == "":
		o.Backend = cps[0].Name
	case !slices.Contains(names, o.Backend):
		return &InputError{Err: fmt.Errorf("--backend %q: not a control-plane host of the spec (they are %s)", o.Backend, strings.Join(names, ", "))}
	}
	if o.caFile() == "" {
		return &InputError{Err: errors.New("lb-failover asks https://ADDRESS:PORT/readyz through your load balancer and must verify the kube-apiserver's certificate: pass --ca-file (the cluster CA, /etc/kubernetes/pki/ca.crt on a control-plane host) or set spec.loadBalancer.healthCheck.caFile")}
	}
	return nil
}

// externalURL is https://address:port/readyz through spec.loadBalancer.external.
func externalURL(c *v1alpha1.Cluster) string {
	host, port, _ := c.APIEndpoint()
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port)) + lb.ReadyzPath
}

// externalPlan is the plan's lines for lb-failover through an external load balancer.
func (k *backendCut) externalPlan() []string {
	return []string{
		fmt.Sprintf("cut backend %s off your load balancer (spec.loadBalancer.external %s) and poll GET %s every %s on fresh connections:",
			k.o.Backend, strings.TrimSuffix(strings.TrimPrefix(k.readyzURL(), "https://"), lb.ReadyzPath), k.readyzURL(), PollInterval),
		"  " + k.faults.faultText(k.o.Backend),
		"  expect: your load balancer's health check takes the backend out; until then requests sent to it time out (measured: failed requests, time from the fault until they stop failing)",
		"  after the hold, drop the rules again: the backend must be taken back by your load balancer's health check",
	}
}

// iterate is one lb-failover iteration through an external load balancer.
func (k *backendCut) iterate(ctx context.Context, n int, _ *preflightState) (*Iteration, error) {
	h, ok := k.hosts.host(k.o.Backend)
	if !ok {
		return nil, fmt.Errorf("--backend %q is not a host of the spec", k.o.Backend)
	}
	if err := k.checkReadyz(ctx); err != nil {
		return nil, &RefusedError{Reasons: []string{fmt.Sprintf("readyz through your load balancer does not answer 200 before the drill: %v", err)},
			Fix: "the API must be up through your load balancer before its failover can be measured: see `hactl status`"}
	}
	cfg, err := k.readyzTLS()
	if err != nil {
		return nil, err
	}
	it := &Iteration{N: n, Targets: []string{h.Name}, Fault: k.faults.faultText(h.Name)}
	// Measured until the put-back, also after Ctrl-C.
	rz, err := probe.StartReadyz(context.WithoutCancel(ctx), probe.ReadyzConfig{URL: k.readyzURL(), TLS: cfg, Interval: PollInterval, Timeout: readyzTimeout})
	if err != nil {
		return nil, err
	}
	t0, tPut, putErr, err := k.faults.hold(ctx, it, h, fmt.Sprintf("iteration %d: cutting %s's kube-apiserver (port %d) off your load balancer", n, h.Name, k.c.APIServerPort()))
	if err != nil {
		rz.Stop()
		return nil, err
	}
	sleepCtx(context.Background(), settle)
	rs := splitReadyz(rz.Stop(), t0, tPut)
	it.ReadyzFailures, it.FailbackOutageMs = rs.failed, rs.failback
	st := rs.heldStats
	switch out := backendOut(st, tPut.Sub(t0)); {
	case st.NoFailure:
		zero := 0.0
		it.RTOMs = &zero
	case out:
		// The load balancer balances over the other backends too: requests fail only when they
		// are sent to the dead one, so the outage ends with the last failure, not the first success.
		it.RTOMs, it.LongestGapMs = msp(st.SettledAfter), msp(st.LongestFailRun)
	default:
		it.Failures = append(it.Failures, fmt.Sprintf("your load balancer kept sending requests to %s until the put-back: the last of %d failed requests was sent %s after the fault, less than %s before the put-back (%s); check its health check of the apiservers",
			h.Name, st.Failed, fmtMs(msp(st.LastFailAfter)), minQuietBeforePut, failedSince(rs.held, t0)))
	}
	return it, putErr
}

// minQuietBeforePut is how long readyz through an external load balancer must have answered
// without a failure before the put-back for the dead backend to count as taken out: at 20 ms a
// request and round robin over the backends, a backend still in rotation fails a request every
// few polls.
const minQuietBeforePut = time.Second

// backendOut reports whether the samples of st (the held ones: a fault held for hold) show the load
// balancer took the dead backend out: failed requests stopped at least minQuietBeforePut before the
// put-back, and succeeded after.
func backendOut(st probe.OutageStats, hold time.Duration) bool {
	return !st.NoFailure && st.Settled && hold-st.LastFailAfter >= minQuietBeforePut
}
