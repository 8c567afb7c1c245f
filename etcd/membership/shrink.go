package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/ui"
)

// ShrinkOptions remove several members, one at a time (5→3 is two removals).
type ShrinkOptions struct {
	Cluster Cluster
	// Names are the members to remove (their hosts' names); at least one, no repeats.
	Names []string
	// Zones maps a member's name to its zone (the spec's hosts); a member without one is left out
	// of the zone check.
	Zones map[string]string
	// AcceptZoneQuorumLoss turns a result in which one zone holds a quorum into a warning
	// (spec.etcd.acceptZoneQuorumLoss).
	AcceptZoneQuorumLoss bool
	// Force skips the quorum guard (not the zone check, not etcd's own strict reconfiguration check).
	Force  bool
	DryRun bool
	// Confirm is asked once, with the whole plan; nil: no question (--yes).
	Confirm func(plan string) (bool, error)
	// Host retires each removed member on its host; nil: hosts are left as they are.
	Host    Retirer
	Printer *ui.Printer
}

// ShrinkResult is what a shrink did (`-o json`).
type ShrinkResult struct {
	// Order is the order of the removals: learners, then followers, the leader last.
	Order []string `json:"order"`
	// Remaining are the voting members left once all are removed.
	Remaining []string `json:"remaining"`
	// Warnings about the result (an even member count, no fault tolerance, an accepted zone
	// quorum).
	Warnings []string `json:"warnings,omitempty"`
	// Removals are the removals done (or planned, with --dry-run), in order; on failure the last
	// one is the one that failed and the members after it were left untouched.
	Removals []*RemoveResult `json:"removals"`
	Plan     []string        `json:"plan"`
}

// ZoneQuorumError refuses a removal after which one zone holds a quorum of the remaining voting
// members (losing that zone would then lose the cluster): the rule the spec's topology check
// applies to spec.hosts (exit 2, nothing changed).
type ZoneQuorumError struct {
	Zone      string
	Members   []string // the remaining voters in Zone
	Remaining int
	Quorum    int
}

func (e *ZoneQuorumError) Error() string {
	return fmt.Sprintf("after the removal zone %q holds %d of the %d voting members (%s) and a quorum is %d (⌊%d/2⌋+1), so losing zone %q would lose the cluster: remove members of other zones instead, or set spec.etcd.acceptZoneQuorumLoss: true to accept this",
		e.Zone, len(e.Members), e.Remaining, strings.Join(e.Members, ", "), e.Quorum, e.Remaining, e.Zone)
}

// ExitCode: refused input.
func (e *ZoneQuorumError) ExitCode() int { return 2 }

// CheckTopology checks the voting members that remain (names) against the zone rule: no zone may
// hold a quorum of them (⌊n/2⌋+1, v1alpha1.ZoneHoldingQuorum, the spec's topology rule) when there
// are at least 2; zones maps names to zones (unknown names are not counted). It returns a *ZoneQuorumError for the first such zone (a warning instead
// when accept), and warnings for an even count (no more failures tolerated than one member fewer)
// and a single member (no fault tolerance).
func CheckTopology(names []string, zones map[string]string, accept bool) (warnings []string, err error) {
	n := len(names)
	switch {
	case n == 1:
		warnings = append(warnings, fmt.Sprintf("1 voting member (%s) is left: NOT highly available, losing it loses the cluster", names[0]))
	case n > 1 && n%2 == 0:
		warnings = append(warnings, fmt.Sprintf("%d voting members are left: they tolerate %d failure(s), as %d would, with a larger quorum (%d); remove one more or add one", n, (n-1)/2, n-1, Quorum(n)))
	}
	if n < 2 {
		return warnings, nil
	}
	zoneOf := make([]string, n)
	for i, name := range names {
		zoneOf[i] = zones[name]
	}
	z, at := v1alpha1.ZoneHoldingQuorum(zoneOf)
	if z == "" {
		return warnings, nil
	}
	e := &ZoneQuorumError{Zone: z, Remaining: n, Quorum: Quorum(n)}
	for _, i := range at {
		e.Members = append(e.Members, names[i])
	}
	if !accept {
		return warnings, e
	}
	warnings = append(warnings, e.Error()+" (accepted: spec.etcd.acceptZoneQuorumLoss is true)")
	return warnings, nil
}

// Shrink removes the members o.Names one at a time with Remove (learners first, then followers,
// the current leader last, so leadership moves at most once). Before anything changes: every name
// must be one member (*NotMemberError, *AmbiguousMemberError), each removal in turn must pass the
// quorum guard (*QuorumError unless o.Force), and the voting members left must pass CheckTopology
// (*ZoneQuorumError); then the whole plan is confirmed once. Each removal reads the cluster again
// (the quorum guard runs on what is live), and the first failure stops the shrink, leaving the
// members after it untouched. The result is returned also on failure.
func Shrink(ctx context.Context, o ShrinkOptions) (*ShrinkResult, error) {
	if len(o.Names) == 0 {
		return nil, errors.New("no member named to remove")
	}
	for i, n := range o.Names {
		if slices.Contains(o.Names[:i], n) {
			return nil, fmt.Errorf("%s is named twice", n)
		}
	}
	v, err := readSettledView(ctx, o.Cluster)
	if err != nil {
		return nil, err
	}
	var targets []Voter
	for _, n := range o.Names {
		m, err := v.find(n)
		if err != nil {
			return nil, err
		}
		targets = append(targets, m)
	}
	rank := func(m Voter) int {
		switch {
		case m.Learner:
			return 0
		case m.ID == v.leader:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(targets, func(a, b Voter) int { return rank(a) - rank(b) })

	res := &ShrinkResult{}
	left := slices.Clone(v.members)
	for _, m := range targets {
		res.Order = append(res.Order, m.Name)
		if err := CheckRemoval(left, m.ID); err != nil {
			var qe *QuorumError
			if !o.Force || !errors.As(err, &qe) || qe.Remaining == 0 {
				return res, err
			}
			o.Printer.Warnf("--force: %v", err)
		}
		left = slices.DeleteFunc(left, func(x Voter) bool { return x.ID == m.ID })
	}
	for _, m := range left {
		if !m.Learner {
			res.Remaining = append(res.Remaining, label(m))
		}
	}
	if res.Warnings, err = CheckTopology(res.Remaining, o.Zones, o.AcceptZoneQuorumLoss); err != nil {
		return res, err
	}
	for _, w := range res.Warnings {
		o.Printer.Warnf("%s", w)
	}
	for i, m := range targets {
		step := fmt.Sprintf("remove %s (ID %x)", m.Name, m.ID)
		if m.ID == v.leader {
			step += ", moving leadership off it first"
		}
		if o.Host != nil {
			step += "; on its host stop and disable etcd and move the data dir aside"
		}
		if i > 0 {
			step += "; once the cluster has a healthy leader again and the quorum guard passes on the live view"
		}
		res.Plan = append(res.Plan, fmt.Sprintf("  %d. %s", i+1, step))
	}
	res.Plan = append(res.Plan, fmt.Sprintf("  voting members left: %s", orNone(res.Remaining)))
	if o.DryRun {
		return res, nil
	}
	if err := confirmPlan(o.Confirm, strings.Join(res.Plan, "\n")); err != nil {
		return res, err
	}
	for _, m := range targets {
		r, err := Remove(ctx, RemoveOptions{Cluster: o.Cluster, Name: m.Name, ID: m.ID, Force: o.Force, Host: o.Host, Printer: o.Printer})
		if r != nil {
			res.Removals = append(res.Removals, r)
		}
		if err != nil {
			return res, fmt.Errorf("remove %s: %w", m.Name, err)
		}
	}
	return res, nil
}

// confirmPlan asks confirm (nil: --yes, no question) with the plan; a no is ErrNotConfirmed.
func confirmPlan(confirm func(plan string) (bool, error), plan string) error {
	if confirm == nil {
		return nil
	}
	ok, err := confirm(plan)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotConfirmed
	}
	return nil
}
