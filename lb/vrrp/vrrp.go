// Package vrrp is the arithmetic of a VRRP election as keepalived runs it: priorities, the weight of a
// tracked check, effective priorities, who wins, and the proof that the virtual IP leaves a node whose
// check fails. It does no I/O and knows nothing of hactl's spec: lb plans the keepalived
// configuration with it and proves the spec's failover rule with it (lb.Plan, lb.FailoverRule), so
// the spec is validated by the arithmetic the renderer uses.
//
// Sources: RFC 5798 (VRRPv3) §5.2.4 (priority 255 belongs to the address owner, 1-254 to backups,
// 0 means "stopped") and §6.4.3 (an advertisement of equal priority from a sender with a greater
// primary IP address wins); keepalived.conf(5) vrrp_script: "weight <-253..253>": a negative weight is
// subtracted while the check fails, a positive one added while it succeeds, 0 puts the instance into
// FAULT state while it fails, and the resulting priority is bounded to 1..254. The numbers are
// api/limits' (MinVRRPPriority, MaxVRRPPriority, MaxCheckWeight).
package vrrp

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/hactl/hactl/api/limits"
)

// Node is one VRRP router of a virtual router (one keepalived vrrp_instance on one host).
type Node struct {
	// Name identifies the node in messages (the host name).
	Name string
	// Addr is the node's primary address: the source of its advertisements (unicast_src_ip), which
	// breaks ties between equal priorities.
	Addr netip.Addr
	// Priority is the configured priority, limits.MinVRRPPriority..limits.MaxVRRPPriority.
	Priority int
}

// DefaultPriorities returns n distinct priorities in descending order: 150, 140, 130, ...
// (limits.DefaultTopVRRPPriority, stepping down by limits.DefaultVRRPPriorityStep) while they
// stay at or above limits.MinVRRPPriority+1 (15 nodes), else 254, 253, ... (up to 253 nodes). The
// lowest is never limits.MinVRRPPriority, so a failed node clamped to limits.MinVRRPPriority still
// ends below every healthy one. It returns
// nil for n < 1 or n > 253.
func DefaultPriorities(n int) []int {
	if n < 1 || n > limits.MaxVRRPPriority-limits.MinVRRPPriority {
		return nil
	}
	top, step := limits.DefaultTopVRRPPriority, limits.DefaultVRRPPriorityStep
	if top-step*(n-1) <= limits.MinVRRPPriority {
		top, step = limits.MaxVRRPPriority, 1
	}
	out := make([]int, n)
	for i := range out {
		out[i] = top - step*i
	}
	return out
}

// Weight returns the vrrp_script weight hactl gives a set of priorities: negative, with a magnitude
// of (highest - lowest) + limits.DefaultVRRPPriorityStep (at most limits.MaxCheckWeight), so that a
// node whose check fails always drops strictly below every node whose check passes, whatever their
// addresses. It returns an error when no weight can do that: the priorities are more than
// limits.MaxCheckWeight-1 apart, or one of them is limits.MinVRRPPriority (a failed node is bounded
// at limits.MinVRRPPriority, so it would tie with that node).
func Weight(priorities []int) (int, error) {
	if len(priorities) == 0 {
		return 0, fmt.Errorf("no priorities")
	}
	hi, lo := slices.Max(priorities), slices.Min(priorities)
	if lo == limits.MinVRRPPriority && len(priorities) > 1 {
		return 0, fmt.Errorf("priorities %s include %d: a failed node never drops below it (effective priorities stop at %d); use priorities of at least %d",
			joinInts(priorities), limits.MinVRRPPriority, limits.MinVRRPPriority, limits.MinVRRPPriority+1)
	}
	w := min(hi-lo+limits.DefaultVRRPPriorityStep, limits.MaxCheckWeight)
	if w <= hi-lo {
		return 0, fmt.Errorf("priorities %s are %d apart: a check weight of at most %d can't bring the highest below the lowest; keep the priorities within %d of each other",
			joinInts(priorities), hi-lo, limits.MaxCheckWeight, limits.MaxCheckWeight-1)
	}
	return -w, nil
}

// Effective returns the priority a node advertises with configured priority p and check weight w
// when its check passes (healthy) or fails, and whether it takes part in the election at all (a
// failing check with weight 0 puts the node into FAULT state: it releases the address).
func Effective(p, w int, healthy bool) (priority int, running bool) {
	switch {
	case w == 0 && !healthy:
		return 0, false
	case w > 0 && healthy, w < 0 && !healthy:
		p += w
	}
	return min(max(p, limits.MinVRRPPriority), limits.MaxVRRPPriority), true
}

// Elect returns the index of the node that holds the address when the nodes for which failed(i) is
// true have a failing check: the running node with the highest effective priority, ties going to
// the higher primary address (RFC 5798 §6.4.3). This is where preemption (keepalived's default)
// converges. It returns -1 when no node runs.
func Elect(nodes []Node, weight int, failed func(i int) bool) int {
	best, bestPrio := -1, 0
	for i, n := range nodes {
		p, ok := Effective(n.Priority, weight, !failed(i))
		if !ok {
			continue
		}
		if best < 0 || p > bestPrio || p == bestPrio && n.Addr.Compare(nodes[best].Addr) > 0 {
			best, bestPrio = i, p
		}
	}
	return best
}

// FailoverError says that the address can't leave a node whose check fails.
type FailoverError struct {
	// Nodes and Weight are the configuration proven wrong.
	Nodes  []Node
	Weight int
	// Failed is the index of a node whose check failed and that still wins against Healthy, a node
	// whose check passed. Reason says why, in words.
	Failed, Healthy int
	Reason          string
}

// Error names the priorities and the weight.
func (e *FailoverError) Error() string {
	return fmt.Sprintf("the VIP cannot move: %s (priorities %s, check weight %d)", e.Reason, Describe(e.Nodes), e.Weight)
}

// ProveFailover checks that a node whose check fails never holds the address while another node's
// check passes: for every pair of a failed node F and a healthy node H, H wins against F (F runs with
// a lower effective priority, or the same and a lower address, or not at all). This is exactly the
// condition for every combination of failed checks to elect a healthy node; in particular, for every
// node in turn, when its check fails another node wins. It also checks that there are at least 2
// nodes and that priorities and weight are in range. It returns nil, a *FailoverError for the first
// pair that breaks the rule, or an error for the other problems.
func ProveFailover(nodes []Node, weight int) error {
	if len(nodes) < 2 {
		return fmt.Errorf("the VIP cannot move: %d node(s), a VIP needs at least 2 to move between", len(nodes))
	}
	if weight < -limits.MaxCheckWeight || weight > limits.MaxCheckWeight {
		return fmt.Errorf("check weight %d is outside %d..%d", weight, -limits.MaxCheckWeight, limits.MaxCheckWeight)
	}
	for _, n := range nodes {
		if n.Priority < limits.MinVRRPPriority || n.Priority > limits.MaxVRRPPriority {
			return fmt.Errorf("priority %d of %s is outside %d..%d", n.Priority, n.Name, limits.MinVRRPPriority, limits.MaxVRRPPriority)
		}
	}
	for f := range nodes {
		fp, running := Effective(nodes[f].Priority, weight, false)
		if !running {
			continue // FAULT: it releases the address
		}
		for h := range nodes {
			if h == f {
				continue
			}
			hp, _ := Effective(nodes[h].Priority, weight, true)
			if hp > fp || hp == fp && nodes[h].Addr.Compare(nodes[f].Addr) > 0 {
				continue
			}
			e := &FailoverError{Nodes: nodes, Weight: weight, Failed: f, Healthy: h}
			if fp > hp {
				e.Reason = fmt.Sprintf("when the check on %s fails it still advertises %d, above %s's %d", nodes[f].Name, fp, nodes[h].Name, hp)
			} else {
				e.Reason = fmt.Sprintf("when the check on %s fails it advertises %d, the same as %s, and wins the tie with the higher address (%s > %s)",
					nodes[f].Name, fp, nodes[h].Name, nodes[f].Addr, nodes[h].Addr)
			}
			if len(nodes) > 2 {
				e.Reason += fmt.Sprintf(", so when %s is the only node whose check passes the VIP stays on a node whose check failed", nodes[h].Name)
			}
			e.Reason += "; " + fix(nodes)
			return e
		}
	}
	return nil
}

// fix suggests a change that makes the configuration fail over.
func fix(nodes []Node) string {
	ps := make([]int, len(nodes))
	for i, n := range nodes {
		ps[i] = n.Priority
	}
	w, err := Weight(ps)
	if err != nil {
		return fmt.Sprintf("no weight can fix this: %v; or use check weight 0 (a failed check releases the VIP)", err)
	}
	return fmt.Sprintf("the check weight must take more than %d (highest - lowest priority) off a failed node: use %d, or leave the weight to hactl",
		slices.Max(ps)-slices.Min(ps), w)
}

// Describe renders nodes as "name=priority, ..." in their order, as messages name a configuration.
func Describe(nodes []Node) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s=%d", n.Name, n.Priority)
	}
	return strings.Join(parts, ", ")
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
