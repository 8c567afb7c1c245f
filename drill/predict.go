package drill

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd/membership"
)

// ZonePrediction is what losing one zone must do, derived from the spec's topology before anything
// is touched (and completed with the leader and VIP holder found at run time).
type ZonePrediction struct {
	Zone string `json:"zone"`
	// Members are the etcd members in the zone, Survivors the count outside it, of Total; Quorum is
	// membership.Quorum(Total).
	Members   []string `json:"members"`
	Survivors int      `json:"survivors"`
	Total     int      `json:"total"`
	Quorum    int      `json:"quorum"`
	// QuorumHolds: Survivors >= Quorum, so writes must go on (after an election if the leader was in
	// the zone); false: no write can be acknowledged until the zone returns.
	QuorumHolds bool `json:"quorumHolds"`
	// LBHosts are the spec's LB hosts in the zone; LBSurvivors those outside it.
	LBHosts     []string `json:"lbHosts,omitempty"`
	LBSurvivors []string `json:"lbSurvivors,omitempty"`
	// Leader is the etcd leader found in preflight, LeaderInZone whether the zone holds it (then a new
	// election must happen when quorum holds).
	Leader       string `json:"leader,omitempty"`
	LeaderInZone bool   `json:"leaderInZone"`
	// VIPHolder is the LB host holding the VIP in preflight; VIPMustMove when it is in the zone.
	VIPHolder   string `json:"vipHolder,omitempty"`
	VIPMustMove bool   `json:"vipMustMove"`
}

// Zones returns the zones of the spec's etcd members and LB hosts, sorted.
func Zones(c *v1alpha1.Cluster) []string {
	var zs []string
	for _, h := range c.Spec.Hosts {
		if (h.HasRole(v1alpha1.RoleEtcd) || h.HasRole(v1alpha1.RoleLB)) && !slices.Contains(zs, h.Zone) {
			zs = append(zs, h.Zone)
		}
	}
	sort.Strings(zs)
	return zs
}

// PredictZone derives the topology part of a zone outage from the spec. It returns an *InputError
// for a zone no host of the spec is in, or a zone that holds no etcd member (--zone names the flag).
func PredictZone(c *v1alpha1.Cluster, zone string) (*ZonePrediction, error) {
	zs := Zones(c)
	if !slices.Contains(zs, zone) {
		return nil, &InputError{Err: fmt.Errorf("--zone %q: unknown zone: the spec's hosts are in %s (spec.hosts[*].zone)", zone, strings.Join(zs, ", "))}
	}
	p := &ZonePrediction{Zone: zone}
	for _, h := range c.EtcdHosts() {
		p.Total++
		if h.Zone == zone {
			p.Members = append(p.Members, h.Name)
		} else {
			p.Survivors++
		}
	}
	if len(p.Members) == 0 {
		return nil, &InputError{Err: fmt.Errorf("--zone %s holds no etcd member (only %s): an az-outage drill needs a zone with members; choose one of %s",
			zone, strings.Join(hostsInZone(c, zone), ", "), strings.Join(memberZones(c), ", "))}
	}
	for _, h := range c.LBHosts() {
		if h.Zone == zone {
			p.LBHosts = append(p.LBHosts, h.Name)
		} else {
			p.LBSurvivors = append(p.LBSurvivors, h.Name)
		}
	}
	p.Quorum = membership.Quorum(p.Total)
	p.QuorumHolds = p.Survivors >= p.Quorum
	return p, nil
}

// SetRuntime completes the prediction with the leader and VIP holder found in preflight.
func (p *ZonePrediction) SetRuntime(leader, vipHolder string) {
	p.Leader, p.VIPHolder = leader, vipHolder
	p.LeaderInZone = slices.Contains(p.Members, leader)
	p.VIPMustMove = vipHolder != "" && slices.Contains(p.LBHosts, vipHolder)
}

// Sentences returns the prediction in words, e.g. "losing az-b leaves 2 of 3 members: quorum (2)
// holds".
func (p *ZonePrediction) Sentences() []string {
	var out []string
	verdict := "quorum holds"
	if !p.QuorumHolds {
		verdict = "QUORUM IS LOST: no write can be acknowledged until the zone returns"
	}
	out = append(out, fmt.Sprintf("losing %s (%s) leaves %d of %d members, quorum is %d: %s",
		p.Zone, strings.Join(p.Members, ", "), p.Survivors, p.Total, p.Quorum, verdict))
	switch {
	case p.Leader == "":
	case p.LeaderInZone && p.QuorumHolds:
		out = append(out, fmt.Sprintf("the leader %s is in %s: the survivors must elect a new leader", p.Leader, p.Zone))
	case p.LeaderInZone:
		out = append(out, fmt.Sprintf("the leader %s is in %s: no new leader can be elected until the zone returns", p.Leader, p.Zone))
	default:
		out = append(out, fmt.Sprintf("the leader %s is outside %s: it must stay leader (no election)", p.Leader, p.Zone))
	}
	switch {
	case len(p.LBHosts) == 0:
	case len(p.LBSurvivors) == 0:
		out = append(out, fmt.Sprintf("every LB host (%s) is in %s: the VIP is unreachable until the zone returns", strings.Join(p.LBHosts, ", "), p.Zone))
	case p.VIPMustMove:
		out = append(out, fmt.Sprintf("the VIP holder %s is in %s: the VIP must move to %s", p.VIPHolder, p.Zone, strings.Join(p.LBSurvivors, " or ")))
	case p.VIPHolder != "":
		out = append(out, fmt.Sprintf("the VIP holder %s is outside %s: the VIP must stay", p.VIPHolder, p.Zone))
	}
	return out
}

func hostsInZone(c *v1alpha1.Cluster, zone string) []string {
	var out []string
	for _, h := range c.Spec.Hosts {
		if h.Zone == zone {
			out = append(out, h.Name)
		}
	}
	return out
}

func memberZones(c *v1alpha1.Cluster) []string {
	var zs []string
	for _, h := range c.EtcdHosts() {
		if !slices.Contains(zs, h.Zone) {
			zs = append(zs, h.Zone)
		}
	}
	sort.Strings(zs)
	return zs
}
