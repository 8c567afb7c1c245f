package observe

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// Healing condition reasons.
const (
	ReasonHealing          = "Replacing"
	ReasonAllMembersServe  = "NoMemberLost"
	ReasonGracePeriod      = "WithinGracePeriod"
	ReasonAutoReplaceOff   = "AutoReplaceOff"
	ReasonNoFreeSpare      = "NoFreeSpare"
	ReasonHealQuorumLost   = "QuorumLost"
	ReasonLearnerPending   = "LearnerPending"
	ReasonClusterNotSeen   = "ClusterNotSeen"
	ReasonMemberRecovered  = "MemberRecovered"
	ReasonHealSucceeded    = "HealSucceeded"
	ReasonHealFailed       = "HealFailed"
	ReasonHealStepFailed   = "StepFailed"
	ReasonNotHealingMember = "MemberNotInSpec"
)

// HealAction is what the operator does about lost members at one look.
type HealAction string

// Heal actions.
const (
	// HealNothing: no member is lost, or healing is not configured.
	HealNothing HealAction = "Nothing"
	// HealWait: a member is unhealthy, its grace period not over: look again at Decision.Until.
	HealWait HealAction = "Wait"
	// HealReport: a member is lost but the operator may not act (autoReplace off, no free spare, no
	// quorum, a learner pending, the cluster not seen): the condition says why; nothing changes.
	HealReport HealAction = "Report"
	// HealStart: replace Decision.Member onto Decision.Spare.
	HealStart HealAction = "Start"
	// HealContinue: a heal is recorded in status.healing: the executor continues it.
	HealContinue HealAction = "Continue"
)

// HealDecision is Decide's verdict; Reason and Message go into the Healing condition.
type HealDecision struct {
	Action HealAction
	// Member and MemberID are the lost member (the one unhealthy longest); Spare the chosen spare.
	Member, MemberID, Spare string
	// Until is when the grace period of Member ends (HealWait).
	Until           time.Time
	Reason, Message string
}

// Decide returns what to do about lost members given spec, st (already updated by Apply for this
// look) and cs (that look's etcd.Status; nil when nothing answered), at now. The rules, in order:
//   - no spec.healing: nothing (the Degraded condition already reports a lost member);
//   - a heal in status.healing: continue it (HealContinue), whatever else holds;
//   - every member healthy: nothing;
//   - the cluster not seen with spec's ID, or no quorum of healthy voters: report only, never a
//     change (etcd cannot commit a membership change without a quorum; the message gives the
//     restore command);
//   - the member unhealthy longest still inside gracePeriod (counted from its unhealthySince):
//     wait until it ends;
//   - its ID not in the member list (nothing to replace), or a heal of it failed less than
//     HealRetryAfter ago: report, and wait for the retry;
//   - a learner in the member list (etcd allows one at a time): report;
//   - no free spare whose zone keeps every zone short of a quorum (a spare in the lost member's
//     zone first, then spec order): report;
//   - autoReplace off: report what would be done;
//   - else start.
func Decide(spec hactlv1.EtcdClusterSpec, st *hactlv1.EtcdClusterStatus, cs *etcd.ClusterStatus, now time.Time) HealDecision {
	h := spec.Healing
	if h == nil {
		return HealDecision{Action: HealNothing}
	}
	if hs := st.Healing; hs != nil {
		return HealDecision{Action: HealContinue, Member: hs.Member, MemberID: hs.MemberID, Spare: hs.Spare, Reason: ReasonHealing,
			Message: fmt.Sprintf("replacing %s (ID %s) by a member on %s: step %s since %s", hs.Member, hs.MemberID, hs.Spare, hs.Step, hs.StepAt.UTC().Format(time.RFC3339))}
	}
	lost := lostMember(st.Members)
	if lost == nil {
		return HealDecision{Action: HealNothing, Reason: ReasonAllMembersServe, Message: fmt.Sprintf("all %d members healthy", len(st.Members))}
	}
	d := HealDecision{Member: lost.Name, MemberID: lost.ID, Action: HealReport}
	if d.MemberID == "" && cs != nil { // a member that did not answer: its ID from the member list
		d.MemberID = memberIDByURL(cs, clientURLOf(spec, lost.Name))
	}
	grace := 5 * time.Minute
	if h.GracePeriod != nil {
		grace = h.GracePeriod.Duration
	}
	down := now.Sub(lost.UnhealthySince.Time).Round(time.Second)
	switch {
	case cs == nil || cs.ClusterID != spec.ClusterID || meta.FindStatusCondition(st.Conditions, hactlv1.ConditionAvailable) == nil:
		d.Reason = ReasonClusterNotSeen
		d.Message = fmt.Sprintf("%s unhealthy for %s, but the operator does not see etcd cluster %s: it changes nothing", lost.Name, down, spec.ClusterID)
		return d
	case !meta.IsStatusConditionTrue(st.Conditions, hactlv1.ConditionAvailable):
		d.Reason = ReasonHealQuorumLost
		d.Message = fmt.Sprintf("%s unhealthy for %s and the quorum is lost: etcd cannot commit a membership change without a quorum, so the operator changes nothing. "+
			"Bring enough members back, or restore the cluster from the newest snapshot: hactl restore -f cluster.yaml --from latest", lost.Name, down)
		return d
	case down < grace:
		d.Action, d.Until = HealWait, lost.UnhealthySince.Add(grace)
		d.Reason = ReasonGracePeriod
		d.Message = fmt.Sprintf("%s unhealthy for %s; it is replaced if it is still unhealthy at %s (gracePeriod %s)", lost.Name, down, d.Until.UTC().Format(time.RFC3339), grace)
		return d
	}
	if d.MemberID == "" {
		d.Reason = ReasonNotHealingMember
		d.Message = fmt.Sprintf("%s unhealthy for %s, but no member of etcd's member list has its client URL: nothing to replace (remove it from spec.members, or add it back with hactl bootstrap)", lost.Name, down)
		return d
	}
	if last := lastHeal(st.Heals, lost.Name); last != nil && last.Result == hactlv1.HealFailed && now.Before(last.FinishedAt.Add(HealRetryAfter)) {
		d.Reason = ReasonHealFailed
		d.Message = fmt.Sprintf("%s unhealthy for %s; the last heal onto %s failed at %s (%s); the next attempt at %s",
			lost.Name, down, last.Spare, last.FinishedAt.UTC().Format(time.RFC3339), last.Message, last.FinishedAt.Add(HealRetryAfter).UTC().Format(time.RFC3339))
		d.Action, d.Until = HealWait, last.FinishedAt.Add(HealRetryAfter)
		return d
	}
	for _, m := range cs.Members {
		if m.IsLearner {
			d.Reason = ReasonLearnerPending
			d.Message = fmt.Sprintf("%s unhealthy for %s, but learner %s is in the cluster (etcd allows one at a time): finish or remove it first", lost.Name, down, cmp.Or(m.Name, m.ID))
			return d
		}
	}
	spare, why := PickSpare(spec, cs, lost.Name)
	if spare == "" {
		d.Reason = ReasonNoFreeSpare
		d.Message = fmt.Sprintf("%s unhealthy for %s, but no spare can receive its member: %s", lost.Name, down, why)
		return d
	}
	d.Spare = spare
	if !h.AutoReplace {
		d.Reason = ReasonAutoReplaceOff
		d.Message = fmt.Sprintf("%s unhealthy for %s (gracePeriod %s); with spec.healing.autoReplace the operator would replace it onto %s (%s)", lost.Name, down, grace, spare, why)
		return d
	}
	d.Action, d.Reason = HealStart, ReasonHealing
	d.Message = fmt.Sprintf("%s unhealthy for %s (gracePeriod %s): replacing it onto %s (%s)", lost.Name, down, grace, spare, why)
	return d
}

// HealRetryAfter is how long after a failed heal of a member the next one may start.
const HealRetryAfter = 10 * time.Minute

// lastHeal is the newest record of heals about member, nil when none.
func lastHeal(heals []hactlv1.HealRecord, member string) *hactlv1.HealRecord {
	for i := len(heals) - 1; i >= 0; i-- {
		if heals[i].Member == member {
			return &heals[i]
		}
	}
	return nil
}

// lostMember is the unhealthy member of ms unhealthy longest (the first in spec order on a tie),
// nil when all are healthy.
func lostMember(ms []hactlv1.MemberStatus) *hactlv1.MemberStatus {
	var lost *hactlv1.MemberStatus
	for i := range ms {
		m := &ms[i]
		if m.Healthy || m.UnhealthySince == nil {
			continue
		}
		if lost == nil || m.UnhealthySince.Before(lost.UnhealthySince) {
			lost = m
		}
	}
	return lost
}

func clientURLOf(spec hactlv1.EtcdClusterSpec, name string) string {
	for _, m := range spec.Members {
		if m.Name == name {
			return m.ClientURL
		}
	}
	return ""
}

func memberIDByURL(cs *etcd.ClusterStatus, clientURL string) string {
	for _, m := range cs.Members {
		if slices.Contains(m.ClientURLs, clientURL) {
			return m.ID
		}
	}
	return ""
}

// PickSpare returns the spare of spec.healing that receives lost's member, and why (the reason
// when none can): free spares only (no member of cs's member list or of spec.members has its name
// or an URL on its address); among them the first in the lost member's zone, else the first in spec
// order whose zone holds no quorum of the members after the replacement
// (v1alpha1.ZoneHoldingQuorum, the spec's topology rule). Members without a zone are not counted.
func PickSpare(spec hactlv1.EtcdClusterSpec, cs *etcd.ClusterStatus, lost string) (spare, why string) {
	if spec.Healing == nil || len(spec.Healing.Spares) == 0 {
		return "", "spec.healing.spares is empty (add spare hosts: spec.etcd.spares of cluster.yaml, then hactl operator deploy)"
	}
	used := usedHosts(spec, cs)
	var lostZone string
	var zones []string // the other members' zones
	for _, m := range spec.Members {
		if m.Name == lost {
			lostZone = m.Zone
			continue
		}
		zones = append(zones, m.Zone)
	}
	var free []hactlv1.SpareHost
	var busy []string
	for _, s := range spec.Healing.Spares {
		if used[s.Name] || used[s.Address] {
			busy = append(busy, s.Name)
			continue
		}
		free = append(free, s)
	}
	if len(free) == 0 {
		return "", fmt.Sprintf("every spare already runs a member (%s): the spare pool is empty", strings.Join(busy, ", "))
	}
	slices.SortStableFunc(free, func(a, b hactlv1.SpareHost) int {
		return boolRank(a.Zone != "" && a.Zone == lostZone) - boolRank(b.Zone != "" && b.Zone == lostZone)
	})
	var refused []string
	for _, s := range free {
		after := append(slices.Clone(zones), s.Zone)
		if z, _ := v1alpha1.ZoneHoldingQuorum(after); z != "" {
			refused = append(refused, fmt.Sprintf("%s would put a quorum of the %d members in zone %s", s.Name, len(after), z))
			continue
		}
		if s.Zone != "" && s.Zone == lostZone {
			return s.Name, fmt.Sprintf("a free spare in %s's zone %s", lost, lostZone)
		}
		return s.Name, fmt.Sprintf("a free spare in zone %s, which keeps every zone short of a quorum", cmp.Or(s.Zone, "(none)"))
	}
	return "", strings.Join(refused, "; ")
}

func boolRank(b bool) int {
	if b {
		return -1
	}
	return 0
}

// hostOf is the host of an URL ("" when it does not parse).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// usedHosts is the set of names and URL hosts of the members of spec and of cs's member list.
func usedHosts(spec hactlv1.EtcdClusterSpec, cs *etcd.ClusterStatus) map[string]bool {
	used := map[string]bool{}
	for _, m := range spec.Members {
		used[m.Name] = true
		used[hostOf(m.ClientURL)] = true
	}
	if cs != nil {
		for _, m := range cs.Members {
			used[m.Name] = true
			for _, u := range append(slices.Clone(m.PeerURLs), m.ClientURLs...) {
				used[hostOf(u)] = true
			}
		}
	}
	return used
}

// FreeSpares counts the spares of spec.healing that run no member of spec.members or cs (by name
// or address): the operator's hactl_operator_free_spares metric, behind the SparePoolEmpty alert.
func FreeSpares(spec hactlv1.EtcdClusterSpec, cs *etcd.ClusterStatus) int {
	if spec.Healing == nil {
		return 0
	}
	used := usedHosts(spec, cs)
	n := 0
	for _, s := range spec.Healing.Spares {
		if !used[s.Name] && !used[s.Address] {
			n++
		}
	}
	return n
}

// SetHealing writes d into st's Healing condition (and nothing else). A decision of HealNothing
// without a Reason (no spec.healing) removes the condition.
func SetHealing(st *hactlv1.EtcdClusterStatus, generation int64, d HealDecision, now time.Time) {
	if d.Reason == "" {
		meta.RemoveStatusCondition(&st.Conditions, hactlv1.ConditionHealing)
		return
	}
	set(st, generation, now, hactlv1.ConditionHealing, d.Action == HealStart || d.Action == HealContinue, d.Reason, d.Message)
}

// Voters returns the members of cs's member list as membership voters, their health from st (by
// member ID; a member st does not know is unhealthy): the input of membership.ReplaceOrder.
func Voters(cs *etcd.ClusterStatus, st *hactlv1.EtcdClusterStatus) []membership.Voter {
	healthy := map[string]bool{}
	for _, m := range st.Members {
		if m.ID != "" {
			healthy[m.ID] = m.Healthy
		}
	}
	var out []membership.Voter
	for _, m := range cs.Members {
		var id uint64
		if _, err := fmt.Sscanf(m.ID, "%x", &id); err != nil {
			continue
		}
		out = append(out, membership.Voter{ID: id, Name: m.Name, Learner: m.IsLearner, Healthy: healthy[m.ID]})
	}
	return out
}
