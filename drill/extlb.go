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

// validateExternal checks lb-failover's options with spec.loadBalancer.external (defaulting
// Component and Backend) and returns an *InputError naming the flag.
func (o *Options) validateExternal() error {
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
func (r *runner) externalPlan() []string {
	return []string{
		fmt.Sprintf("cut backend %s off your load balancer (spec.loadBalancer.external %s) and poll GET %s every %s on fresh connections:",
			r.o.Backend, strings.TrimSuffix(strings.TrimPrefix(r.readyzURL(), "https://"), lb.ReadyzPath), r.readyzURL(), PollInterval),
		"  " + r.faultText(r.o.Backend),
		"  expect: your load balancer's health check takes the backend out; until then requests sent to it time out (measured: failed requests, time from the fault until they stop failing)",
		"  after the hold, drop the rules again: the backend must be taken back by your load balancer's health check",
	}
}

// externalIteration is one lb-failover iteration through an external load balancer.
func (r *runner) externalIteration(ctx context.Context, n int) (*Iteration, error) {
	h, ok := r.hosts.host(r.o.Backend)
	if !ok {
		return nil, fmt.Errorf("--backend %q is not a host of the spec", r.o.Backend)
	}
	if err := r.checkReadyz(ctx); err != nil {
		return nil, &RefusedError{Reasons: []string{fmt.Sprintf("readyz through your load balancer does not answer 200 before the drill: %v", err)},
			Fix: "the API must be up through your load balancer before its failover can be measured: see `hactl status`"}
	}
	cfg, err := r.readyzTLS()
	if err != nil {
		return nil, err
	}
	it := &Iteration{N: n, Targets: []string{h.Name}, Fault: r.faultText(h.Name)}
	// Measured until the put-back, also after Ctrl-C.
	rz, err := probe.StartReadyz(context.WithoutCancel(ctx), probe.ReadyzConfig{URL: r.readyzURL(), TLS: cfg, Interval: PollInterval, Timeout: readyzTimeout})
	if err != nil {
		return nil, err
	}
	t0, tPut, putErr, err := r.holdFault(ctx, it, h, fmt.Sprintf("iteration %d: cutting %s's kube-apiserver (port %d) off your load balancer", n, h.Name, r.c.APIServerPort()))
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
