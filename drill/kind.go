package drill

import (
	"context"
	"fmt"
	"time"
)

// kindChecks validates one kind's options against the spec without contacting any host; each
// error is an *InputError naming the flag or field. Options.Validate calls them in this order,
// between its shared checks.
type kindChecks interface {
	// checkFlags checks (and defaults) the flags only this kind takes, before the workload's flags.
	checkFlags(o *Options) error
	// checkSpec checks the options against the spec, after the shared flags.
	checkSpec(o *Options) error
	// minHold is the shortest --hold that lets the fault be measured and how it is derived, for
	// the error message (0: the kind holds no fault).
	minHold(o *Options) (need time.Duration, what string, err error)
}

// drillKind is one kind of drill (the way k0sctl gives each phase its own type): run takes the
// lock, builds the shared env, then calls preflight and plan once and iterate Options.Count times;
// each iteration applies its fault, holds it and puts it back (the shared faulter, or the restore
// drill's restart of etcd). The kinds share the workload, journal, lock and report through env.
type drillKind interface {
	kindChecks
	// header fills the report's fields that depend on the kind: Method or Component, and the
	// workload's settings.
	header(rep *Report)
	// vipHolder says whether the shared preflight (and the wait before each further iteration)
	// finds the VIP holder, and whether exactly one is required.
	vipHolder() vipNeed
	// preflight runs the kind's own checks once the shared ones (leftovers, health, the VIP holder)
	// passed; errors refuse the drill before anything is touched.
	preflight(ctx context.Context, pre *preflightState) error
	// plan returns the plan's lines.
	plan(pre *preflightState) []string
	// iterate runs iteration n: fault, hold, put-back, figures. The iteration is returned with its
	// failures also with an error (a put-back that failed).
	iterate(ctx context.Context, n int, pre *preflightState) (*Iteration, error)
}

// kindOf chooses the type of o.Kind, with e as its shared plumbing (nil when it only validates):
// the one place that looks at the kind. lb-failover is a VIP failover with hactl's load balancer
// and a backend cut with spec.loadBalancer.external. It returns nil for an unknown kind.
func kindOf(o *Options, e *env) drillKind {
	switch o.Kind {
	case KillLeader:
		return newLeaderKill(e)
	case AZOutage:
		return newZoneOutage(e)
	case LBFailover:
		if o.Cluster.ExternalLB() != nil {
			return newBackendCut(e)
		}
		return newVIPFailover(e)
	case Restore:
		return &restoreDrill{env: e}
	}
	return nil
}

// unknownKind validates a Kind no type implements: the shared checks run, then it is refused.
type unknownKind Kind

func (unknownKind) checkFlags(o *Options) error { return noRestoreFlags(o) }

func (k unknownKind) checkSpec(o *Options) error {
	if err := needThreeMembers(o); err != nil {
		return err
	}
	return &InputError{Err: fmt.Errorf("unknown drill %q", Kind(k))}
}

func (unknownKind) minHold(*Options) (time.Duration, string, error) { return 0, "", nil }

// noRestoreFlags refuses the restore drill's own flags on another drill.
func noRestoreFlags(o *Options) error {
	if o.MaxRPO != 0 || o.Warmup != 0 || o.Onto != nil || o.KeepFenced {
		return &InputError{Err: fmt.Errorf("--max-rpo, --warmup, --onto and --keep-fenced are for drill restore")}
	}
	return nil
}

// needThreeMembers refuses a drill that takes an etcd member down on fewer than 3 members.
func needThreeMembers(o *Options) error {
	if n := len(o.Cluster.EtcdHosts()); n < 3 {
		return &InputError{Err: fmt.Errorf("spec.hosts: %d etcd member(s): losing one loses quorum; drills need 3 or 5 members", n)}
	}
	return nil
}

// electionHold is the shortest hold of a drill that takes etcd members down: an election takes up
// to 2x the election timeout (a follower campaigns after a randomised 1x-2x, etcd raft), plus 1s.
func electionHold(o *Options) (time.Duration, string, error) {
	et := o.Cluster.Spec.Etcd.ElectionTimeout.Duration
	return 2*et + time.Second, fmt.Sprintf("2 x the election timeout (%s) + 1s", et), nil
}
