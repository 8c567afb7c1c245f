package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/lb"
)

// vipFailover is lb-failover with hactl's load balancer: --component (HAProxy or Keepalived) is
// stopped on the VIP holder while readyz is asked through the VIP and every LB host reports it;
// the VIP must move, readyz answer again, and the VIP settle after the put-back.
type vipFailover struct {
	*env
	faults *faulter
}

// newVIPFailover returns lb-failover on e (nil: for Options.Validate only).
func newVIPFailover(e *env) *vipFailover {
	return &vipFailover{env: e, faults: &faulter{env: e, atStart: true,
		text: func(v1alpha1.Host) string { return fmt.Sprintf("%s stopped (systemctl stop)", e.o.Component.Unit()) },
		of:   func(v1alpha1.Host) fault.Fault { return fault.Fault{StopUnits: []string{e.o.Component.Unit()}} },
	}}
}

func (*vipFailover) checkFlags(o *Options) error { return noRestoreFlags(o) }

func (*vipFailover) checkSpec(o *Options) error {
	c := o.Cluster
	if c.Spec.LoadBalancer == nil {
		return &InputError{Err: errors.New("spec.loadBalancer is not set: lb-failover needs the VIP and its LB hosts, or spec.loadBalancer.external")}
	}
	switch {
	case o.Component == "":
		o.Component = ComponentHAProxy
	case o.Component == ComponentAPIServer:
		return &InputError{Err: errors.New("--component kube-apiserver is for spec.loadBalancer.external (a backend cut off your load balancer); hactl's load balancer fails over with --component haproxy or keepalived")}
	}
	if o.Backend != "" {
		return &InputError{Err: errors.New("--backend is for spec.loadBalancer.external; with hactl's load balancer lb-failover stops --component on the VIP holder")}
	}
	if n := len(c.LBHosts()); n < 2 {
		return &InputError{Err: fmt.Errorf("spec.hosts: %d LB host(s): lb-failover needs at least 2 (a VIP holder and a backup)", n)}
	}
	if o.caFile() == "" {
		return &InputError{Err: errors.New("lb-failover asks https://VIP/readyz and must verify the kube-apiserver's certificate: pass --ca-file (the cluster CA, /etc/kubernetes/pki/ca.crt on a control-plane host) or set spec.loadBalancer.healthCheck.caFile")}
	}
	return nil
}

// minHold: the VIP moves after keepalived's check fails and the backup's master-down interval
// (RFC 5798).
func (*vipFailover) minHold(o *Options) (time.Duration, string, error) {
	p, err := lb.Plan(o.Cluster)
	if err != nil {
		return 0, "", &InputError{Err: err}
	}
	return expectedVIPMove(p, o.Component) + time.Second, "the expected VIP move + 1s", nil
}

func (k *vipFailover) header(rep *Report)                             { rep.Component = k.o.Component }
func (*vipFailover) vipHolder() vipNeed                               { return vipRequired }
func (*vipFailover) preflight(context.Context, *preflightState) error { return nil }

func (k *vipFailover) plan(pre *preflightState) []string {
	o := k.o
	out := []string{fmt.Sprintf("stop %s on the VIP holder (now %s) and poll GET %s every %s on fresh connections",
		o.Component.Unit(), dash(pre.vipHolder), k.readyzURL(), PollInterval)}
	if o.Component == ComponentKeepalived {
		out = append(out, fmt.Sprintf("  expect: the VIP on %s within about %s (keepalived sends a priority-0 advertisement as it stops: the backup takes over after its skew time, RFC 5798 §6.4.3)",
			strings.Join(k.otherLB(pre.vipHolder), " or "), expectedVIPMove(k.lbPlan, o.Component)))
	} else {
		out = append(out, fmt.Sprintf("  expect: the VIP on %s within about %s (keepalived's check of HAProxy fails after %ds x%d, then the backup waits out the RFC 5798 master-down interval %s)",
			strings.Join(k.otherLB(pre.vipHolder), " or "), expectedVIPMove(k.lbPlan, o.Component).Round(10*time.Millisecond), lb.ScriptInterval, k.lbPlan.ScriptFall, masterDown(k.lbPlan).Round(10*time.Millisecond)))
	}
	out = append(out, fmt.Sprintf("  after the hold, start %s again and wait for the VIP to settle on %s", o.Component.Unit(), k.expectedSettle(pre.vipHolder)))
	out = append(out, k.faults.holdPlan()...)
	if o.MaxRTO > 0 {
		return append(out, fmt.Sprintf("verdict: fail (exit 3) if readyz through the VIP takes longer than %s to answer again, the VIP does not move or does not settle", o.MaxRTO))
	}
	return append(out, "verdict: fail (exit 3) if the VIP does not move, readyz does not answer again or the VIP does not settle; add --max-rto for a verdict on the RTO")
}

// otherLB returns the LB hosts other than holder.
func (k *vipFailover) otherLB(holder string) []string {
	var out []string
	for _, h := range k.c.LBHosts() {
		if h.Name != holder {
			out = append(out, h.Name)
		}
	}
	return out
}

// expectedSettle names where the VIP must settle after the put-back: the highest-priority LB host,
// or (nopreempt) wherever it moved to.
func (k *vipFailover) expectedSettle(holder string) string {
	if k.lbPlan.Nopreempt {
		return "the host it moved to (nopreempt)"
	}
	return k.highestPriority()
}

func (k *vipFailover) highestPriority() string {
	best := k.lbPlan.Nodes[0]
	for _, n := range k.lbPlan.Nodes[1:] {
		if n.Priority > best.Priority {
			best = n
		}
	}
	return best.Name
}

// iterate is one lb-failover iteration with hactl's load balancer.
func (k *vipFailover) iterate(ctx context.Context, n int, pre *preflightState) (*Iteration, error) {
	holder := pre.vipHolder
	h, ok := k.hosts.host(holder)
	if !ok {
		return nil, fmt.Errorf("the VIP holder %q is not a host of the spec", holder)
	}
	if err := k.checkReadyz(ctx); err != nil {
		return nil, &RefusedError{Reasons: []string{fmt.Sprintf("readyz through the VIP does not answer 200 before the drill: %v", err)},
			Fix: "the API must be up through the VIP before its failover can be measured: see `hactl status`"}
	}
	it := &Iteration{N: n, Targets: []string{holder}, VIPBefore: holder, Fault: fmt.Sprintf("%s: %s stopped", holder, k.o.Component.Unit())}
	w, err := k.startLBWatch(context.WithoutCancel(ctx), true) // measures until the put-back, also after Ctrl-C
	if err != nil {
		return nil, err
	}
	// The hold ends at tPut: the put-back can hand the VIP back (preemption) before it returns, so
	// samples sent from tPut on belong to the failback, not to the outage being measured.
	t0, tPut, putErr, err := k.faults.hold(ctx, it, h, fmt.Sprintf("iteration %d: stopping %s on the VIP holder %s", n, k.o.Component.Unit(), holder))
	if err != nil {
		w.stop()
		return nil, err
	}
	moved := ""
	if putErr == nil {
		// Wait for the VIP to settle: the highest-priority host, or (nopreempt) where it is.
		want := ""
		if !k.lbPlan.Nopreempt {
			want = k.highestPriority()
		}
		// The watchers already stream every LB host's VIP state: read them, no SSH round trips.
		// A fresh context: the put-back and its checks finish also after Ctrl-C.
		_ = wait.PollUntilContextTimeout(context.Background(), PollInterval, 10*masterDown(k.lbPlan)+10*time.Second, true, func(context.Context) (bool, error) {
			hs := probe.Holders(probe.Merge(w.watches...), time.Now())
			if len(hs) == 1 && (want == "" || hs[0] == want) {
				moved = hs[0]
				return true, nil
			}
			return false, nil
		})
		if moved == "" {
			it.Failures = append(it.Failures, fmt.Sprintf("the VIP did not settle on %s within %s of the put-back", dash(want), 10*masterDown(k.lbPlan)+10*time.Second))
		}
	}
	sleepCtx(context.Background(), settle)
	o := w.stop()
	if o.err != nil {
		it.Failures = append(it.Failures, fmt.Sprintf("VIP watcher: %v", o.err))
	}
	if at := o.holderAt(t0); len(at) != 1 || at[0] != holder {
		it.Failures = append(it.Failures, fmt.Sprintf("at the fault the VIP watchers saw the VIP on [%s], not on the holder %s", strings.Join(at, " "), holder))
	}
	it.VIPAfter, it.VIPMovedMs, _, it.Notes = o.after(t0, nil) // readyz failures: splitReadyz below
	if d, who := dualVIP(o.events, nil, t0); d > maxDualVIP {
		it.Failures = append(it.Failures, fmt.Sprintf("the VIP was on %s at once for %s: both answer ARP for it", strings.Join(who, " and "), fmtMs(msp(d))))
	}
	if it.VIPMovedMs == nil {
		it.Failures = append(it.Failures, fmt.Sprintf("the VIP did not move off %s while %s was stopped (%s)", holder, k.o.Component, k.o.Hold))
	}
	rs := splitReadyz(o.samples, t0, tPut)
	it.ReadyzFailures, it.RTOMs, it.FailbackOutageMs = rs.failed, rs.rto, rs.failback
	if rs.rto == nil {
		it.Failures = append(it.Failures, fmt.Sprintf("readyz through the VIP did not answer 200 again before the put-back (%s)", rs.why))
	}
	if moved != "" {
		it.SettledOn = moved
		if at, ok := settledAt(o.events, moved, tPut); ok {
			it.SettleMs = msp(at.Sub(tPut))
		} else {
			zero := 0.0
			it.SettleMs = &zero
		}
	}
	return it, putErr
}
