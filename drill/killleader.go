package drill

import (
	"context"
	"fmt"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
)

// leaderKill is kill-leader: the etcd leader found before each iteration is taken down by
// --method (its etcd killed, partitioned by iptables, or the host taken down from here).
type leaderKill struct {
	etcdDrill
}

// newLeaderKill returns kill-leader on e (nil: for Options.Validate only).
func newLeaderKill(e *env) *leaderKill {
	k := &leaderKill{}
	k.etcdDrill = newEtcdDrill(e, k, func(v1alpha1.Host) []string { return []string{etcd.UnitName} },
		func(v1alpha1.Host) string {
			return fmt.Sprintf("iptables drops etcd's peer (%d) and client (%d) traffic in and out", e.c.Spec.Etcd.PeerPort, e.c.Spec.Etcd.ClientPort)
		},
		func(v1alpha1.Host) fault.Fault {
			return fault.Fault{DropPorts: []int{e.c.Spec.Etcd.PeerPort, e.c.Spec.Etcd.ClientPort}}
		})
	return k
}

func (*leaderKill) checkSpec(o *Options) error { return needThreeMembers(o) }
func (*leaderKill) vipHolder() vipNeed         { return vipNone }
func (*leaderKill) lostQuorum() bool           { return false }

func (k *leaderKill) plan(pre *preflightState) []string {
	out := []string{
		fmt.Sprintf("find the etcd leader before each iteration (now %s, term %d) and take it down by --method %s:", pre.leader, pre.term, k.o.Method),
		"  " + k.faults.faultText(pre.leader),
	}
	healthy := 0
	for _, ep := range pre.status.Endpoints {
		if ep.Healthy {
			healthy++
		}
	}
	if n := len(k.c.EtcdHosts()); healthy-1 < membership.Quorum(n) {
		out = append(out, fmt.Sprintf("WARNING (--force): only %d of %d members are healthy: without the leader %d remain, below the quorum of %d: no leader can be elected and no write acknowledged until the put-back (the drill will fail)",
			healthy, n, healthy-1, membership.Quorum(n)))
	}
	return append(out, k.planTail()...)
}

// faultText is the one target's fault.
func (k *leaderKill) faultText(targets []v1alpha1.Host) string {
	return k.faults.faultText(targets[0].Name)
}

func (k *leaderKill) targets(pre *preflightState) ([]v1alpha1.Host, error) {
	h, ok := k.hosts.host(pre.leader)
	if !ok {
		return nil, fmt.Errorf("the leader %s is not a host of the spec", pre.leader)
	}
	return []v1alpha1.Host{h}, nil
}

// watch watches a partitioned leader (--method network) on its own loopback through SSH: it must
// step down.
func (k *leaderKill) watch(ctx context.Context, m *etcdRun) error {
	if k.o.Method != MethodNetwork {
		return nil
	}
	var err error
	if m.own, err = k.watchOwnView(ctx, m.targets[0]); err != nil {
		k.p.Warnf("drill: cannot watch %s on its loopback through SSH (its step-down will not be observed): %v", m.targets[0].Name, err)
	}
	return nil
}

// judge adds the partitioned leader's step-down and fails an iteration without a new leader.
func (k *leaderKill) judge(m *etcdRun) {
	it, pre := m.it, m.pre
	if m.own != nil {
		seen := 0 // answers of the partitioned member during the hold
		for _, o := range m.ownObs {
			if o.OK && o.At.After(m.t0) && o.At.Before(m.tPut) {
				seen++
			}
		}
		o, ok := steppedDownAt(m.ownObs, m.t0, pre.leaderID)
		switch {
		case ok && o.At.Before(m.tPut):
			it.StepDownMs = msp(o.At.Sub(m.t0))
		case seen == 0:
			it.Notes = append(it.Notes, fmt.Sprintf("the partitioned leader %s could not be asked on its loopback through SSH during the hold (sshd AllowTcpForwarding?): its step-down was not observed", pre.leader))
		default:
			it.Failures = append(it.Failures, fmt.Sprintf("the partitioned leader %s still reported itself leader throughout the hold (%d answers on its loopback)", pre.leader, seen))
		}
	}
	if it.ElectionMs == nil {
		it.Failures = append(it.Failures, fmt.Sprintf("no new leader was observed within the hold (%s)", k.o.Hold))
	}
	m.requireRecovery()
}
