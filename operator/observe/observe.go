// Package observe turns one look at an etcd cluster (etcd.Status) into an EtcdCluster's status:
// each member as seen, the leader, the phase and the conditions Available, QuorumAtRisk and Degraded
// (BackupFresh and Maintenance are set by the backup and maintenance steps). It is pure: no client,
// no clock of its own, so the operator's reconcile and its tests share one set of rules.
package observe

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// Condition reasons (CamelCase, as metav1.Condition requires).
const (
	ReasonQuorumHealthy       = "QuorumHealthy"
	ReasonNoQuorum            = "NoQuorum"
	ReasonUnreachable         = "Unreachable"
	ReasonClusterMismatch     = "ClusterIDMismatch"
	ReasonDuplicateCluster    = "DuplicateCluster"
	ReasonAllHealthy          = "AllMembersHealthy"
	ReasonMembersUnhealthy    = "MembersUnhealthy"
	ReasonAlarm               = "AlarmRaised"
	ReasonUnknownMember       = "MemberNotInSpec"
	ReasonOneFailureAway      = "OneFailureFromQuorumLoss"
	ReasonQuorumLost          = "QuorumLost"
	ReasonTolerates           = "ToleratesFailures"
	ReasonSecret              = "ClientCertificateUnavailable"
	ReasonCertificateRejected = "CertificateRejected"
)

// Look is one observation: Status's result and error (the error is data here: an unreachable
// cluster or a refused certificate becomes a condition, never a failed reconcile). CredentialsErr
// is set instead when the client certificate could not be had (Secret missing, incomplete or not
// PEM): nothing was asked.
type Look struct {
	Status         *etcd.ClusterStatus
	Err            error
	CredentialsErr error
}

// Apply writes what look saw into st (the EtcdCluster's status as it was: conditions keep their
// lastTransitionTime when their status does not change) for spec at generation, at now. The
// phase goes Pending → Running ⇄ Degraded: Pending until the cluster was once seen with spec's
// cluster ID, Running while Available and not Degraded.
func Apply(st *hactlv1.EtcdClusterStatus, spec hactlv1.EtcdClusterSpec, generation int64, look Look, now time.Time) {
	st.ObservedGeneration = generation
	cs := look.Status
	if look.CredentialsErr != nil {
		cs = nil
	}
	seen := cs != nil && cs.ClusterID != "" && anyReachable(cs)
	switch {
	case !seen:
		err := cmp.Or(look.CredentialsErr, look.Err)
		st.Members = unseenMembers(spec, err, unhealthySince(st.Members), now)
		st.Leader = ""
		msg := "no member answered"
		if err != nil {
			msg = err.Error()
		}
		reason := ReasonUnreachable
		switch {
		case look.CredentialsErr != nil:
			reason = ReasonSecret
		case isTLSRejection(look.Err):
			reason = ReasonCertificateRejected
			msg = "the members refuse the operator's client certificate or present one its CA did not sign: " + msg
		}
		set(st, generation, now, hactlv1.ConditionAvailable, false, reason, msg)
		set(st, generation, now, hactlv1.ConditionQuorumAtRisk, true, reason, "the operator cannot see the quorum: "+msg)
		set(st, generation, now, hactlv1.ConditionDegraded, true, reason, msg)
	case cs.ClusterID != spec.ClusterID:
		st.Members = unseenMembers(spec, nil, unhealthySince(st.Members), now)
		st.Leader = ""
		msg := fmt.Sprintf("the members answer as etcd cluster %s, not spec.clusterID %s: the operator does nothing to them", cs.ClusterID, spec.ClusterID)
		set(st, generation, now, hactlv1.ConditionAvailable, false, ReasonClusterMismatch, msg)
		set(st, generation, now, hactlv1.ConditionQuorumAtRisk, true, ReasonClusterMismatch, msg)
		set(st, generation, now, hactlv1.ConditionDegraded, true, ReasonClusterMismatch, msg)
		seen = false
	default:
		observed(st, spec, generation, cs, now)
	}
	switch {
	case seen && meta.IsStatusConditionTrue(st.Conditions, hactlv1.ConditionAvailable) && !meta.IsStatusConditionTrue(st.Conditions, hactlv1.ConditionDegraded):
		st.Phase = hactlv1.PhaseRunning
	case seen || (st.Phase != "" && st.Phase != hactlv1.PhasePending):
		st.Phase = hactlv1.PhaseDegraded
	default:
		st.Phase = hactlv1.PhasePending
	}
}

func observed(st *hactlv1.EtcdClusterStatus, spec hactlv1.EtcdClusterSpec, generation int64, cs *etcd.ClusterStatus, now time.Time) {
	byURL := map[string]etcd.EndpointStatus{}
	for _, ep := range cs.Endpoints {
		byURL[ep.Endpoint] = ep
	}
	alarms := map[string][]string{}
	for _, a := range cs.Alarms {
		alarms[a.MemberID] = append(alarms[a.MemberID], a.Alarm)
	}
	st.Leader = cs.LeaderName
	since := unhealthySince(st.Members)
	st.Members = nil
	var unhealthy, alarmed []string
	for _, m := range spec.Members {
		ep, ok := byURL[m.ClientURL]
		ms := hactlv1.MemberStatus{Name: m.Name}
		if !ok {
			ms.Error = "not asked"
		} else {
			ms.ID, ms.Healthy, ms.Version = ep.MemberID, ep.Healthy, ep.Version
			ms.DBSizeBytes, ms.DBSizeInUseBytes, ms.RaftIndex = ep.DBSizeBytes, ep.DBSizeInUseBytes, ep.RaftIndex
			ms.Error = cmp.Or(ep.Error, ep.HealthError)
			switch {
			case !ep.Reachable:
			case ep.IsLeader:
				ms.Role = "leader"
			case ep.IsLearner:
				ms.Role = "learner"
			default:
				ms.Role = "follower"
			}
			ms.Alarms = alarms[ep.MemberID]
		}
		if !ms.Healthy {
			unhealthy = append(unhealthy, m.Name)
			ms.UnhealthySince = cmp.Or(since[m.Name], &metav1.Time{Time: now})
		}
		for _, a := range ms.Alarms {
			alarmed = append(alarmed, m.Name+": "+a)
		}
		st.Members = append(st.Members, ms)
	}
	for id, as := range alarms { // alarms of members the spec does not name
		if !slices.ContainsFunc(st.Members, func(ms hactlv1.MemberStatus) bool { return ms.ID == id }) {
			for _, a := range as {
				alarmed = append(alarmed, id+": "+a)
			}
		}
	}
	slices.Sort(alarmed)

	// Voters as the member list has them; healthy voters as their endpoints answered.
	inSpec := map[string]bool{}
	for _, m := range spec.Members {
		inSpec[m.ClientURL] = true
	}
	voters, healthyVoters := 0, 0
	var unknown []string
	for _, mi := range cs.Members {
		if !slices.ContainsFunc(mi.ClientURLs, func(u string) bool { return inSpec[u] }) {
			unknown = append(unknown, cmp.Or(mi.Name, mi.ID))
		}
		if mi.IsLearner {
			continue
		}
		voters++
		for _, u := range mi.ClientURLs {
			if ep, ok := byURL[u]; ok && ep.Healthy {
				healthyVoters++
				break
			}
		}
	}
	quorum := membership.Quorum(voters)

	if cs.QuorumReachable && cs.LeaderID != "" {
		set(st, generation, now, hactlv1.ConditionAvailable, true, ReasonQuorumHealthy,
			fmt.Sprintf("leader %s; %d of %d voting members healthy (quorum %d)", cmp.Or(cs.LeaderName, cs.LeaderID), healthyVoters, voters, quorum))
	} else {
		set(st, generation, now, hactlv1.ConditionAvailable, false, ReasonNoQuorum,
			fmt.Sprintf("no leader or no quorum: %d of %d voting members healthy, a quorum is %d; unhealthy: %s", healthyVoters, voters, quorum, orNone(unhealthy)))
	}
	switch {
	case healthyVoters < quorum:
		set(st, generation, now, hactlv1.ConditionQuorumAtRisk, true, ReasonQuorumLost,
			fmt.Sprintf("%d of %d voting members healthy, fewer than the quorum of %d: the cluster cannot commit", healthyVoters, voters, quorum))
	case healthyVoters-1 < quorum:
		set(st, generation, now, hactlv1.ConditionQuorumAtRisk, true, ReasonOneFailureAway,
			fmt.Sprintf("%d of %d voting members healthy and a quorum is %d: one more failure stops writes (unhealthy: %s)", healthyVoters, voters, quorum, orNone(unhealthy)))
	default:
		set(st, generation, now, hactlv1.ConditionQuorumAtRisk, false, ReasonTolerates,
			fmt.Sprintf("%d of %d voting members healthy, a quorum is %d: %d more failure(s) tolerated", healthyVoters, voters, quorum, healthyVoters-quorum))
	}
	switch {
	case len(unhealthy) > 0:
		set(st, generation, now, hactlv1.ConditionDegraded, true, ReasonMembersUnhealthy, "unhealthy: "+memberErrors(st.Members))
	case len(alarmed) > 0:
		set(st, generation, now, hactlv1.ConditionDegraded, true, ReasonAlarm, "alarms: "+strings.Join(alarmed, ", "))
	case len(unknown) > 0:
		set(st, generation, now, hactlv1.ConditionDegraded, true, ReasonUnknownMember,
			"members not in spec.members: "+strings.Join(unknown, ", ")+" (add them to the EtcdCluster or remove them with hactl etcd member remove)")
	default:
		set(st, generation, now, hactlv1.ConditionDegraded, false, ReasonAllHealthy, fmt.Sprintf("all %d members healthy, no alarm", len(spec.Members)))
	}
}

// MarkDuplicate makes st Degraded and not Available because owner (namespace/name) is the
// EtcdCluster that watches this etcd cluster ID; the duplicate never acts.
func MarkDuplicate(st *hactlv1.EtcdClusterStatus, generation int64, clusterID, owner string, now time.Time) {
	msg := fmt.Sprintf("EtcdCluster %s already watches etcd cluster %s; this one does nothing: delete it", owner, clusterID)
	st.ObservedGeneration = generation
	set(st, generation, now, hactlv1.ConditionAvailable, false, ReasonDuplicateCluster, msg)
	set(st, generation, now, hactlv1.ConditionDegraded, true, ReasonDuplicateCluster, msg)
	st.Phase = hactlv1.PhaseDegraded
}

// Owner returns the EtcdCluster among items that owns clusterID: the oldest by creationTimestamp,
// then by namespace/name (so every replica picks the same one). ok is false when none has it.
func Owner(items []hactlv1.EtcdCluster, clusterID string) (owner hactlv1.EtcdCluster, ok bool) {
	for _, c := range items {
		if c.Spec.ClusterID != clusterID || c.DeletionTimestamp != nil {
			continue
		}
		if !ok || older(c, owner) {
			owner, ok = c, true
		}
	}
	return owner, ok
}

func older(a, b hactlv1.EtcdCluster) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

func set(st *hactlv1.EtcdClusterStatus, generation int64, now time.Time, typ string, status bool, reason, msg string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	if len(msg) > 32768 { // metav1.Condition's message limit
		msg = msg[:32768]
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// unhealthySince maps each member of ms to its UnhealthySince (nil entries left out).
func unhealthySince(ms []hactlv1.MemberStatus) map[string]*metav1.Time {
	out := map[string]*metav1.Time{}
	for _, m := range ms {
		if m.UnhealthySince != nil {
			out[m.Name] = m.UnhealthySince.DeepCopy()
		}
	}
	return out
}

// unseenMembers is every member of spec as not reachable (err says why), unhealthy since the time
// since records, or now.
func unseenMembers(spec hactlv1.EtcdClusterSpec, err error, since map[string]*metav1.Time, now time.Time) []hactlv1.MemberStatus {
	var out []hactlv1.MemberStatus
	for _, m := range spec.Members {
		ms := hactlv1.MemberStatus{Name: m.Name, Error: "not reachable", UnhealthySince: cmp.Or(since[m.Name], &metav1.Time{Time: now})}
		if err != nil {
			ms.Error = "not reachable: " + err.Error()
		}
		out = append(out, ms)
	}
	return out
}

func anyReachable(cs *etcd.ClusterStatus) bool {
	return slices.ContainsFunc(cs.Endpoints, func(ep etcd.EndpointStatus) bool { return ep.Reachable })
}

func isTLSRejection(err error) bool { return err != nil && etcd.IsTLSRejection(err) }

func memberErrors(ms []hactlv1.MemberStatus) string {
	var parts []string
	for _, m := range ms {
		if !m.Healthy {
			parts = append(parts, m.Name+" ("+cmp.Or(m.Error, "unhealthy")+")")
		}
	}
	return strings.Join(parts, ", ")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
