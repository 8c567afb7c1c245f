package drill

import (
	"context"
	"fmt"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
)

// zoneOutage is az-outage: every etcd member and LB host of --zone is taken down by --method
// (isolated by iptables, their units killed, or the hosts taken down from here), and what happens
// is compared with what the spec's topology predicts.
type zoneOutage struct {
	etcdDrill
}

// newZoneOutage returns az-outage on e (nil: for Options.Validate only).
func newZoneOutage(e *env) *zoneOutage {
	k := &zoneOutage{}
	k.etcdDrill = newEtcdDrill(e, k, unitsOf,
		func(h v1alpha1.Host) string {
			return fmt.Sprintf("iptables drops all traffic in and out except SSH (port %d)", sshPort(e.c, h))
		},
		func(h v1alpha1.Host) fault.Fault { return fault.Fault{Isolate: true, SSHPort: sshPort(e.c, h)} })
	return k
}

func (*zoneOutage) checkSpec(o *Options) error {
	if err := needThreeMembers(o); err != nil {
		return err
	}
	c := o.Cluster
	if o.Zone == "" {
		return &InputError{Err: fmt.Errorf("--zone is required: one of %s", strings.Join(Zones(c), ", "))}
	}
	p, err := PredictZone(c, o.Zone)
	if err != nil {
		return err
	}
	if !p.QuorumHolds && !o.ExpectOutage {
		return &InputError{Err: fmt.Errorf("--zone %s: %s; refused: add --expect-outage to run it anyway (the drill then measures the recovery after the zone returns)",
			o.Zone, p.Sentences()[0])}
	}
	if p.QuorumHolds && o.ExpectOutage {
		return &InputError{Err: fmt.Errorf("--expect-outage: losing %s leaves %d of %d members, quorum holds: there is no outage to expect; drop the flag", o.Zone, p.Survivors, p.Total)}
	}
	return nil
}

// vipHolder: the prediction says whether the VIP must move, from its holder.
func (k *zoneOutage) vipHolder() vipNeed {
	if k.c.ManagedLB() != nil {
		return vipWanted
	}
	return vipNone
}

// plan completes the prediction with the leader and the VIP holder (into the report) and says it.
func (k *zoneOutage) plan(pre *preflightState) []string {
	pred, _ := PredictZone(k.c, k.o.Zone)
	pred.SetRuntime(pre.leader, pre.vipHolder)
	k.report.Prediction = pred
	out := []string{fmt.Sprintf("take down every host of %s by --method %s:", k.o.Zone, k.o.Method)}
	for _, h := range k.zoneHosts() {
		out = append(out, "  "+k.faults.faultText(h.Name))
	}
	out = append(out, pred.Sentences()...)
	return append(out, k.planTail()...)
}

// faultText is the one target's fault, or how many hosts of the zone went down by which method.
func (k *zoneOutage) faultText(targets []v1alpha1.Host) string {
	if len(targets) > 1 {
		return fmt.Sprintf("%d hosts of %s by --method %s", len(targets), k.o.Zone, k.o.Method)
	}
	return k.faults.faultText(targets[0].Name)
}

// zoneHosts are the etcd members and LB hosts of o.Zone.
func (k *zoneOutage) zoneHosts() []v1alpha1.Host {
	var out []v1alpha1.Host
	for _, h := range drillHosts(k.c) {
		if h.Zone == k.o.Zone {
			out = append(out, h)
		}
	}
	return out
}

func (k *zoneOutage) targets(*preflightState) ([]v1alpha1.Host, error) { return k.zoneHosts(), nil }

// watch watches the VIP (and readyz through it when a CA is known) when the zone holds LB hosts.
func (k *zoneOutage) watch(ctx context.Context, m *etcdRun) error {
	if k.c.ManagedLB() == nil || k.report.Prediction == nil || len(k.report.Prediction.LBHosts) == 0 {
		return nil
	}
	var err error
	m.lbw, err = k.startLBWatch(ctx, false)
	return err
}

func (k *zoneOutage) lostQuorum() bool {
	return k.report.Prediction != nil && !k.report.Prediction.QuorumHolds
}

// judge adds the VIP's figures and compares the observation with the prediction.
func (k *zoneOutage) judge(m *etcdRun) {
	m.requireRecovery()
	it, lbo := m.it, m.lbo
	if lbo != nil {
		// Hosts taken off the network (or powered off) are not where clients reach the VIP; with
		// --method process they still are.
		cut := map[string]bool{}
		if k.o.Method != MethodProcess {
			for _, h := range m.targets {
				cut[h.Name] = true
			}
		}
		var notes []string
		it.VIPAfter, it.VIPMovedMs, it.ReadyzFailures, notes = lbo.after(m.t0, cut)
		it.Notes = append(it.Notes, notes...)
		if d, who := dualVIP(lbo.events, cut, m.t0); d > maxDualVIP {
			it.Failures = append(it.Failures, fmt.Sprintf("the VIP was on %s at once for %s, both reachable: both answer ARP for it (keepalived killed with SIGKILL leaves its address configured, as a crash would)",
				strings.Join(who, " and "), fmtMs(msp(d))))
		}
		if lbo.readyz {
			if o := lbo.outage(m.t0); o != nil {
				it.Failures = append(it.Failures, o.Error())
			}
		}
	}
	if p := k.report.Prediction; p != nil {
		it.Observed = &Observed{QuorumHeld: m.quorumHeld, LeaderChanged: m.leaderChanged, VIPMoved: it.VIPMovedMs != nil}
		if p.QuorumHolds != m.quorumHeld {
			it.Failures = append(it.Failures, fmt.Sprintf("predicted quorum holds=%v, observed %v (%d writes acknowledged during the outage)", p.QuorumHolds, m.quorumHeld, it.WritesAckedDuringFault))
		}
		if p.QuorumHolds && p.LeaderInZone != m.leaderChanged {
			it.Failures = append(it.Failures, fmt.Sprintf("predicted a new election=%v, observed leader changed=%v", p.LeaderInZone, m.leaderChanged))
		}
		if lbo != nil && p.VIPHolder != "" && p.VIPMustMove != (it.VIPMovedMs != nil) {
			it.Failures = append(it.Failures, fmt.Sprintf("predicted the VIP moves=%v, observed %v", p.VIPMustMove, it.VIPMovedMs != nil))
		}
	}
}
