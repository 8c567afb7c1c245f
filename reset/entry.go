package reset

import (
	"context"
	"slices"

	"github.com/hactl/hactl/etcd/membership"
)

// Reset is `hactl reset`: the plan (NewPlan); when a planned host runs an etcd member and the run
// is not a dry run, the members reached through the bastion (o.Etcd: membership.ClusterFromSpec);
// then show, which prints the plan and, unless dryRun, asks whether to go on (its error stops the
// run: nothing changed); with dryRun nothing more; else Run.
//
// Errors: NewPlan's (*InputError); the bastion's, wrapped as "ssh: …"; the spec's members that
// cannot be derived → *exitcode.UsageError (exit 2); show's, as it is; Run's.
func Reset(ctx context.Context, o Options, dryRun bool, show func(Plan) error) error {
	plan, err := NewPlan(o)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(plan.Hosts, func(h HostPlan) bool { return h.Member }) && !dryRun {
		var closeTunnel func()
		if o.Etcd, closeTunnel, err = membership.OpenFromSpec(o.Cluster, o.Cluster, o.Prompt); err != nil {
			return err
		}
		defer closeTunnel()
	}
	if err := show(plan); err != nil || dryRun {
		return err
	}
	return Run(ctx, o, plan)
}
