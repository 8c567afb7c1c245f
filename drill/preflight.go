package drill

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
)

// vipNeed is whether preflight finds the VIP holder of hactl's load balancer.
type vipNeed int

const (
	// vipNone: the kind does not look at the VIP.
	vipNone vipNeed = iota
	// vipWanted: the holder is found when exactly one host holds the VIP (az-outage's prediction).
	vipWanted
	// vipRequired: exactly one host must hold the VIP (lb-failover; --force overrides in preflight).
	vipRequired
)

// preflightState is what preflight found: the leader and the VIP holder.
type preflightState struct {
	leader   string // member name
	leaderID uint64
	term     uint64
	status   *etcd.ClusterStatus
	// vipHolder is the LB host holding the VIP ("" without a load balancer or not asked).
	vipHolder string
}

// preflight refuses when an earlier drill left something behind (journal or on-host leftovers:
// never overridable) or when the cluster is unhealthy (--force overrides), and finds the leader
// and the VIP holder.
func (e *env) preflight(ctx context.Context, need vipNeed) (*preflightState, error) {
	e.p.Infof("drill/preflight: looking for an earlier drill's leftovers and checking every member's health")
	j, err := readJournal(e.c.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	insp := e.hosts.inspect(ctx, drillHosts(e.c))
	if reasons := leftoverReasons(j, insp); len(reasons) > 0 {
		return nil, &RefusedError{Reasons: reasons, Fix: "an earlier drill left these behind: put everything back with `hactl drill cleanup --yes` (same -f), then run the drill again"}
	}
	pre, reasons, err := e.health(ctx)
	if err != nil {
		return nil, err
	}
	if len(reasons) > 0 {
		if !e.o.Force {
			return nil, &RefusedError{Reasons: reasons, Fix: "a drill on an unhealthy cluster measures the wrong thing and may lose quorum: fix it first (see `hactl status`) or add --force"}
		}
		e.p.Warnf("drill/preflight: --force: going ahead although %s", strings.Join(reasons, "; "))
	}
	if need != vipNone {
		holders, err := e.vipHolders(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case len(holders) == 1:
			pre.vipHolder = holders[0]
		case need == vipRequired && !e.o.Force:
			return nil, &RefusedError{Reasons: []string{fmt.Sprintf("the VIP is held by %d hosts (%s), want exactly 1", len(holders), strings.Join(holders, ", "))},
				Fix: "see `hactl status` (load balancer section) and fix keepalived first"}
		}
	}
	return pre, nil
}

// health asks every member for its status and returns the leader and what is unhealthy.
func (e *env) health(ctx context.Context) (*preflightState, []string, error) {
	return health(ctx, e.c, e.files, e.o.EtcdDial)
}

// health asks every member of c for its status and returns the leader and what is unhealthy.
func health(ctx context.Context, c *v1alpha1.Cluster, files etcd.TLSFiles, dial etcd.Option) (*preflightState, []string, error) {
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return nil, nil, err
	}
	st, err := etcd.StatusWithTimeout(ctx, etcd.ClientURLs(members), files, 3*time.Second, 3*time.Second, dial)
	if st == nil {
		return nil, nil, fmt.Errorf("drill/preflight: reading the members' status: %w", err)
	}
	pre := &preflightState{status: st}
	var reasons []string
	if !st.QuorumReachable {
		reasons = append(reasons, "no quorum reachable")
	}
	names := map[string]string{}
	for _, m := range members {
		names[m.ClientURL()] = m.Name
	}
	for _, ep := range st.Endpoints {
		name := names[ep.Endpoint]
		switch {
		case !ep.Reachable:
			reasons = append(reasons, fmt.Sprintf("member %s (%s) unreachable: %s", name, ep.Endpoint, ep.Error))
		case !ep.Healthy:
			reasons = append(reasons, fmt.Sprintf("member %s (%s) unhealthy: %s", name, ep.Endpoint, ep.HealthError))
		case ep.IsLearner:
			reasons = append(reasons, fmt.Sprintf("member %s is a learner (not promoted)", name))
		}
		if ep.IsLeader {
			pre.leader, pre.term = name, ep.RaftTerm
			pre.leaderID, _ = strconv.ParseUint(ep.MemberID, 16, 64)
		}
	}
	for _, a := range st.Alarms {
		reasons = append(reasons, fmt.Sprintf("alarm %s raised on member %s (etcdctl alarm list)", a.Alarm, a.MemberID))
	}
	if pre.leader == "" && st.QuorumReachable {
		reasons = append(reasons, "no member reports being the leader")
	}
	return pre, reasons, nil
}

// waitHealthy waits (up to 2 minutes) for every member to be healthy again before iteration i.
func (e *env) waitHealthy(ctx context.Context, i int, need vipNeed) (*preflightState, error) {
	var pre *preflightState
	var reasons []string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pre, reasons, err = e.health(ctx)
		lastErr = err
		if err != nil || len(reasons) > 0 {
			return false, nil
		}
		if need == vipNone {
			return true, nil
		}
		holders, herr := e.vipHolders(ctx)
		switch {
		case herr != nil:
			lastErr = herr
			return false, nil
		case len(holders) != 1:
			reasons = append(reasons, fmt.Sprintf("VIP held by %d hosts", len(holders)))
			return false, nil
		}
		pre.vipHolder = holders[0]
		return true, nil
	})
	switch {
	case err == nil:
		return pre, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("before iteration %d: %w", i, ctx.Err())
	case lastErr != nil:
		return nil, fmt.Errorf("before iteration %d: the cluster did not become healthy within 2m: %w", i, lastErr)
	}
	return nil, &RefusedError{Reasons: reasons, Fix: fmt.Sprintf("the cluster did not become healthy within 2m before iteration %d", i)}
}
