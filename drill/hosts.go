package drill

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// sshTimeout bounds one remote command of a drill (inspect, fault, put-back: the restore script
// may wait up to 30 s per unit it starts).
const sshTimeout = 3 * time.Minute

// hosts keeps one SSH connection per host for the drill (a provision.Pool), dialled on first use
// and redialled when a command fails on a dead connection (a host that was down and came back).
type hosts struct {
	c     *v1alpha1.Cluster
	conns *provision.Pool[*provision.Client]
}

func newHosts(c *v1alpha1.Cluster, d *provision.Dialer) *hosts {
	return &hosts{c: c, conns: provision.NewPool(d)}
}

func (hs *hosts) host(name string) (v1alpha1.Host, bool) {
	for _, h := range hs.c.Spec.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return v1alpha1.Host{}, false
}

// target is the SSH target of the spec host name (provision.TargetOf: IPv4-mapped addresses
// unmapped); an error when the spec has no such host.
func (hs *hosts) target(name string) (provision.Target, error) {
	h, ok := hs.host(name)
	if !ok {
		return provision.Target{}, fmt.Errorf("host %s is not in the spec", name)
	}
	return provision.TargetOf(h), nil
}

// client returns the host's connection, dialling it when there is none.
func (hs *hosts) client(ctx context.Context, name string) (*provision.Client, error) {
	t, err := hs.target(name)
	if err != nil {
		return nil, err
	}
	return hs.conns.Client(ctx, t)
}

// forget closes and drops the host's connection (the host went down: the next command redials).
func (hs *hosts) forget(name string) { hs.conns.Forget(name) }

// run runs script on host as root, bounded by sshTimeout. A command that fails because the
// connection died is retried once on a new connection (provision.Pool.Run).
func (hs *hosts) run(ctx context.Context, name, step, script string, opts ...provision.RunOption) (provision.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, sshTimeout)
	defer cancel()
	t, err := hs.target(name)
	if err != nil {
		return provision.Result{}, err
	}
	return hs.conns.Run(ctx, t, step, script, opts...)
}

// hostRunner is a provision.Runner on one host through hosts.run (sshTimeout, one redial), for
// provision.GatherFacts.
type hostRunner struct {
	hs   *hosts
	name string
}

var _ provision.Runner = hostRunner{}

func (r hostRunner) Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error) {
	return r.hs.run(ctx, r.name, step, command, opts...)
}

// facts gathers req on host with provision's one facts command (through run). The result's Host
// (HostInfo) is zero: drill reads none of it. Errors: run's, or provision.ParseFacts's
// (*provision.IncompleteFactsError when the output was cut off), prefixed with step.
func (hs *hosts) facts(ctx context.Context, name, step string, req provision.FactsRequest) (*provision.Facts, error) {
	return provision.GatherFacts(ctx, hostRunner{hs: hs, name: name}, step, req)
}

// close closes every connection.
func (hs *hosts) close() { _ = hs.conns.Close() }

// unitsOf returns the units a drill may stop on h: etcd on members, haproxy and keepalived on LB
// hosts.
func unitsOf(h v1alpha1.Host) []string {
	var u []string
	if h.HasRole(v1alpha1.RoleEtcd) {
		u = append(u, etcd.UnitName)
	}
	if h.HasRole(v1alpha1.RoleLB) {
		u = append(u, ComponentHAProxy.Unit(), ComponentKeepalived.Unit())
	}
	return u
}

// drillHosts are the hosts a drill may touch: etcd members and LB hosts, and with
// spec.loadBalancer.external the control-plane hosts (lb-failover's backends), in spec order.
func drillHosts(c *v1alpha1.Cluster) []v1alpha1.Host {
	var out []v1alpha1.Host
	ext := c.ExternalLB() != nil
	for _, h := range c.Spec.Hosts {
		if h.HasRole(v1alpha1.RoleEtcd) || h.HasRole(v1alpha1.RoleLB) || (ext && h.HasRole(v1alpha1.RoleControlPlane)) {
			out = append(out, h)
		}
	}
	return out
}

// hostLeftovers is what one host still carries from an earlier drill.
type hostLeftovers struct {
	Host      string
	Leftovers fault.Leftovers
	Err       error // the host could not be inspected
}

// inspect reads every drill host's leftovers concurrently: one facts command per host
// (fault.InspectRequest, read by fault.InspectFrom); a host that cannot be inspected is recorded
// with its error.
func (hs *hosts) inspect(ctx context.Context, list []v1alpha1.Host) []hostLeftovers {
	out := make([]hostLeftovers, len(list))
	for i, h := range list {
		out[i].Host = h.Name
	}
	_ = provision.ForEach(ctx, out, hs.c.Spec.SSH.MaxParallel, func(hl hostLeftovers) string { return hl.Host }, func(ctx context.Context, hl hostLeftovers) error {
		i := slices.IndexFunc(list, func(h v1alpha1.Host) bool { return h.Name == hl.Host })
		units := unitsOf(list[i])
		f, err := hs.facts(ctx, hl.Host, "drill/inspect", fault.InspectRequest(units))
		if err == nil {
			out[i].Leftovers, err = fault.InspectFrom(f, units)
		}
		out[i].Err = err
		return nil
	})
	return out
}

// leftoverReasons turns inspections and a journal into refusal reasons (nil when clean). Inactive
// units are only leftovers when a drill marker says a drill stopped them; otherwise they are the
// health check's business.
func leftoverReasons(j *Journal, insp []hostLeftovers) []string {
	var out []string
	if j != nil {
		out = append(out, j.describe()...)
	}
	for _, hl := range insp {
		switch {
		case hl.Err != nil:
			out = append(out, fmt.Sprintf("%s: could not be inspected: %v", hl.Host, hl.Err))
		case hl.Leftovers.Any():
			for _, d := range hl.Leftovers.Describe() {
				out = append(out, hl.Host+": "+d)
			}
		}
	}
	return out
}

// putBack runs the restore script on every named host concurrently (with a fresh context: also
// after Ctrl-C) and returns a *NotRestoredError naming what is left broken, or nil.
func (hs *hosts) putBack(names []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*sshTimeout)
	defer cancel()
	var mu sync.Mutex
	var left []string
	err := provision.ForEach(ctx, names, hs.c.Spec.SSH.MaxParallel, func(n string) string { return n }, func(ctx context.Context, n string) error {
		res, err := hs.run(ctx, n, "drill/put-back", fault.RestoreScript())
		l := fault.ParseRestore(string(res.Stdout)).Left
		if err != nil && len(l) == 0 {
			l = []string{fmt.Sprintf("the put-back did not run (%v); the host puts itself back when its deadman timer fires (hactl-drill-restore.timer)", err)}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, x := range l {
			left = append(left, n+": "+x)
		}
		return err
	})
	if len(left) == 0 && err == nil {
		return nil
	}
	return &NotRestoredError{Left: left, Err: err}
}

// waitSSH dials host until it answers or timeout passes (a host coming back from --method host).
func (hs *hosts) waitSSH(ctx context.Context, name string, timeout time.Duration) error {
	hs.forget(name)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		defer dcancel()
		_, last = hs.client(dctx, name)
		return last == nil, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return fmt.Errorf("%s: SSH did not answer within %s: %w", name, timeout, last)
	}
	return nil
}
