package membership

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/hactl/hactl/ui"
)

// Joiner adds one host to the running cluster with the learner join (AddLearner, the member
// started with the member list etcd returned, WaitCaughtUp, Promote), then checks it serving.
// Join returns the new member's ID. hactl's implementation runs the etcd phases of `hactl bootstrap`
// for that host only (bootstrap/join); the operator's heal runs the same steps one at a time.
type Joiner interface {
	Join(ctx context.Context, host string) (id uint64, err error)
}

// ReplaceOptions are one replacement of member Old by a new member on host New.
type ReplaceOptions struct {
	Cluster Cluster
	// Old is the member's name; New the host that gets the new member and NewPeerURL its peer URL
	// (checked to be no member's yet).
	Old, New, NewPeerURL string
	// Force skips the quorum guard when Old has to be removed first (see Replace).
	Force  bool
	DryRun bool
	// Confirm is asked with the plan; nil: no question (--yes).
	Confirm func(plan string) (bool, error)
	// Joiner adds New; Host retires Old's host after its removal (nil: left as it is).
	Joiner  Joiner
	Host    Retirer
	Printer *ui.Printer
}

// Replacement orders.
const (
	// OrderAddFirst: New joins (learner, promoted) before Old is removed; the voting members never
	// drop below their count before.
	OrderAddFirst = "add-first"
	// OrderRemoveFirst: Old is removed first, when etcd would refuse the add (see Replace).
	OrderRemoveFirst = "remove-first"
)

// ReplaceResult is what a replacement did (`-o json`).
type ReplaceResult struct {
	Old   string `json:"old"`
	OldID string `json:"oldID"`
	New   string `json:"new"`
	NewID string `json:"newID,omitempty"`
	// Order is OrderAddFirst or OrderRemoveFirst, and Why says why.
	Order string `json:"order"`
	Why   string `json:"why"`
	// Joined: New is a voting member.
	Joined  bool          `json:"joined"`
	Removal *RemoveResult `json:"removal,omitempty"`
	Plan    []string      `json:"plan"`
}

// AlreadyMemberError refuses a replacement onto a host that already runs a member (exit 2).
type AlreadyMemberError struct {
	Host, ID, PeerURL string
}

func (e *AlreadyMemberError) Error() string {
	return fmt.Sprintf("%s already runs etcd member %s (peer %s): replace onto a host that is no member; to move a member, remove it first", e.Host, e.ID, e.PeerURL)
}

// ExitCode: refused input.
func (e *AlreadyMemberError) ExitCode() int { return 2 }

// LearnerPendingError refuses a replacement while a learner is in the cluster: etcd allows one
// learner at a time (--max-learners=1), so New could not be added (exit 2).
type LearnerPendingError struct{ Learner string }

func (e *LearnerPendingError) Error() string {
	return fmt.Sprintf("learner %s is still in the cluster (etcd allows one at a time): finish its join (hactl bootstrap) or remove it (hactl etcd member remove) first", e.Learner)
}

// ExitCode: refused input.
func (e *LearnerPendingError) ExitCode() int { return 2 }

// ReplaceOrder decides how to replace the member old of members: OrderAddFirst when the healthy
// voting members are at least a quorum of the voters plus one, since etcd's strict reconfiguration
// check refuses any add, a learner's too, unless the leader has been connected to that many
// (etcdserver mayAddMember, isConnectedToQuorumAfterAddingNewMemberSince; etcd v3.6); else
// OrderRemoveFirst, which needs CheckRemoval(members, old) to pass. why says which figures decided.
func ReplaceOrder(members []Voter, old uint64) (order, why string) {
	voters, healthy := 0, 0
	for _, m := range members {
		if !m.Learner {
			voters++
			if m.Healthy {
				healthy++
			}
		}
	}
	if healthy >= Quorum(voters+1) {
		return OrderAddFirst, fmt.Sprintf("%d of %d voting members are healthy, at least a quorum (%d) of %d: etcd accepts the learner while %s is still a member", healthy, voters, Quorum(voters+1), voters+1, nameOf(members, old))
	}
	return OrderRemoveFirst, fmt.Sprintf("only %d of %d voting members are healthy, fewer than a quorum (%d) of %d: etcd refuses any member add until %s is removed", healthy, voters, Quorum(voters+1), voters+1, nameOf(members, old))
}

func nameOf(members []Voter, id uint64) string {
	for _, m := range members {
		if m.ID == id {
			return label(m)
		}
	}
	return fmt.Sprintf("%x", id)
}

// Replace replaces member o.Old by a new member on host o.New: the order from ReplaceOrder (add
// first whenever etcd allows it, so the voting members never drop below their count before; for a
// dead member of a 3-member cluster, remove first, quorum-guarded), the plan confirmed, then
// o.Joiner.Join(New) and Remove(Old) (leadership moved off Old first, Old's host retired) in that
// order. The result is returned also on failure. Errors: *NotMemberError, *AlreadyMemberError,
// *LearnerPendingError and *QuorumError (exit 2) before anything changed; ErrNotConfirmed; the
// join's or the removal's error (a join that failed after Old's removal leaves a cluster one member
// short: run the replacement's join again with hactl bootstrap, the message says so).
func Replace(ctx context.Context, o ReplaceOptions) (*ReplaceResult, error) {
	if o.Joiner == nil {
		return nil, errors.New("membership.Replace: no Joiner")
	}
	v, err := readSettledView(ctx, o.Cluster)
	if err != nil {
		return nil, err
	}
	old, err := v.find(o.Old)
	if err != nil {
		return nil, err
	}
	res := &ReplaceResult{Old: o.Old, OldID: fmt.Sprintf("%x", old.ID), New: o.New}
	if err := v.checkNew(o.New, o.NewPeerURL); err != nil {
		return res, err
	}
	for _, m := range v.members {
		if m.Learner {
			return res, &LearnerPendingError{Learner: label(m)}
		}
	}
	res.Order, res.Why = ReplaceOrder(v.members, old.ID)
	if res.Order == OrderRemoveFirst {
		if err := CheckRemoval(v.members, old.ID); err != nil {
			var qe *QuorumError
			if !o.Force || !errors.As(err, &qe) || qe.Remaining == 0 {
				return res, err
			}
			o.Printer.Warnf("--force: %v", err)
		}
	}
	join := fmt.Sprintf("add %s as a learner (peer %s), start it with the member list etcd returns, wait until it caught up, promote it", o.New, o.NewPeerURL)
	remove := fmt.Sprintf("remove %s (ID %x)", o.Old, old.ID)
	if old.ID == v.leader {
		remove += ", leadership moved off it first"
	}
	if o.Host != nil {
		remove += "; on its host: etcd stopped and disabled, data dir moved aside (never deleted)"
	}
	steps := []string{join, remove}
	if res.Order == OrderRemoveFirst {
		steps = []string{remove, join}
	}
	res.Plan = append(res.Plan, "order "+res.Order+": "+res.Why)
	for i, s := range steps {
		res.Plan = append(res.Plan, fmt.Sprintf("%d. %s", i+1, s))
	}
	if o.DryRun {
		return res, nil
	}
	if err := confirmPlan(o.Confirm, strings.Join(res.Plan, "\n")); err != nil {
		return res, err
	}
	if o.Confirm != nil {
		// The answer may come minutes later: decide again on a fresh view.
		if v, err = readSettledView(ctx, o.Cluster); err != nil {
			return res, err
		}
		if old, err = v.find(o.Old); err != nil {
			return res, err
		}
		if order, _ := ReplaceOrder(v.members, old.ID); order != res.Order {
			return res, fmt.Errorf("the cluster's health changed while the plan was confirmed (the order would now be %s): run it again", order)
		}
	}
	removeOld := func() error {
		rr, err := Remove(ctx, RemoveOptions{Cluster: o.Cluster, Name: o.Old, ID: old.ID, Force: o.Force, Host: o.Host, Printer: o.Printer})
		res.Removal = rr
		if err != nil && rr != nil && rr.Removed {
			// Out of the cluster; only its host could not be retired (e.g. it is dead): say so, go on.
			o.Printer.Warnf("%s: %v", o.Old, err)
			return nil
		}
		return err
	}
	if res.Order == OrderRemoveFirst {
		if err := removeOld(); err != nil {
			return res, err
		}
	}
	id, err := o.Joiner.Join(ctx, o.New)
	if err != nil {
		if res.Order == OrderRemoveFirst {
			return res, fmt.Errorf("etcd/join %s: %w (%s was removed already: the cluster is one member short until %s joins; fix the cause and run the replacement again)", o.New, err, o.Old, o.New)
		}
		return res, fmt.Errorf("etcd/join %s: %w (%s is still a member; nothing was removed)", o.New, err, o.Old)
	}
	res.NewID, res.Joined = fmt.Sprintf("%x", id), true
	if res.Order == OrderAddFirst {
		if err := removeOld(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// checkNew refuses host as the new member's when a member carries its name or its peer URL.
func (v *view) checkNew(host, peerURL string) error {
	for _, m := range v.members {
		peers := v.peers[m.ID]
		if m.Name == host || slices.Contains(peers, peerURL) {
			return &AlreadyMemberError{Host: host, ID: fmt.Sprintf("%x", m.ID), PeerURL: strings.Join(peers, ",")}
		}
		// The same address under another port is the same machine.
		for _, p := range peers {
			a, errA := url.Parse(p)
			b, errB := url.Parse(peerURL)
			if errA == nil && errB == nil && peerURL != "" && a.Hostname() == b.Hostname() {
				return &AlreadyMemberError{Host: host, ID: fmt.Sprintf("%x", m.ID), PeerURL: p}
			}
		}
	}
	return nil
}
