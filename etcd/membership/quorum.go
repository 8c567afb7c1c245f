// Package membership changes an etcd cluster's membership safely, as etcd's runtime
// reconfiguration guide (etcd.io/docs/v3.6/op-guide/runtime-configuration) describes: a member is
// removed only when the members that remain can still commit (a quorum of them healthy), the leader
// hands leadership over before it is removed, and the removed member's host stops the unit and keeps
// its data dir aside. It is a small API for the CLI (`hactl etcd member ...`) and for callers that
// heal a cluster without a person (the operator).
package membership

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
)

// Voter is a member as a quorum check sees it: its name (empty when added but never started), ID,
// whether it is a learner (no vote), and whether its endpoint served a linearizable read.
type Voter struct {
	Name    string
	ID      uint64
	Learner bool
	Healthy bool
}

// Quorum is the number of votes n voting members need to commit: a majority, ⌊n/2⌋+1 (raft). The
// formula lives once, in api/v1alpha1 (the spec's topology check needs it and may import no more).
func Quorum(n int) int { return v1alpha1.Quorum(n) }

// QuorumError refuses a removal that would leave fewer healthy voting members than the quorum of
// those that remain. Its message does the arithmetic; callers pass --force to override.
type QuorumError struct {
	Removing       string
	Remaining      int      // voting members after the removal
	HealthyLeft    []string // the healthy ones among them
	UnhealthyLeft  []string
	QuorumRequired int
}

func (e *QuorumError) Error() string {
	if e.Remaining == 0 {
		return fmt.Sprintf("%s is the only voting member: removing it would leave no cluster; add a member first (hactl etcd member replace, or a host in the spec and hactl bootstrap)", e.Removing)
	}
	return fmt.Sprintf("removing %s leaves %d voting member(s), of which %d healthy (%s); a quorum of %d voters is %d (⌊%d/2⌋+1), so the cluster could not commit: bring %s back first (--force skips hactl's check, but etcd's own strict reconfiguration check still refuses a removal that leaves fewer connected voters than a quorum)",
		e.Removing, e.Remaining, len(e.HealthyLeft), orNone(e.HealthyLeft), e.Remaining, e.QuorumRequired, e.Remaining, strings.Join(e.UnhealthyLeft, ", "))
}

// ExitCode makes a refused removal exit 2 (refused input, nothing changed), not a runtime failure.
func (e *QuorumError) ExitCode() int { return 2 }

// CheckRemoval returns nil when removing the member with ID id from members leaves a quorum of the
// remaining voting members healthy (a learner's removal never changes the quorum), else a
// *QuorumError. It returns an error too when no member has that ID.
func CheckRemoval(members []Voter, id uint64) error {
	i := slices.IndexFunc(members, func(v Voter) bool { return v.ID == id })
	if i < 0 {
		return fmt.Errorf("no member with ID %x", id)
	}
	target := members[i]
	if target.Learner {
		return nil
	}
	e := &QuorumError{Removing: label(target)}
	for _, v := range members {
		if v.ID == id || v.Learner {
			continue
		}
		e.Remaining++
		if v.Healthy {
			e.HealthyLeft = append(e.HealthyLeft, label(v))
		} else {
			e.UnhealthyLeft = append(e.UnhealthyLeft, label(v))
		}
	}
	e.QuorumRequired = Quorum(e.Remaining)
	if e.Remaining > 0 && len(e.HealthyLeft) >= e.QuorumRequired {
		return nil
	}
	return e
}

func label(v Voter) string {
	if v.Name == "" {
		return fmt.Sprintf("(unstarted %x)", v.ID)
	}
	return v.Name
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
