package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// etcdAccess loads the spec and opens what reaching its members takes (the bastion, when there is
// one); close releases both.
func etcdAccess(s Streams, g *globalOptions) (p *ui.Printer, cl membership.Cluster, closeFn func(), err error) {
	p, c, _, closeLog, err := hostRun(s, g)
	if err != nil {
		return nil, cl, nil, err
	}
	cl, closeTunnel, err := membership.OpenFromSpec(c, c, terminalPrompter(s.In, s.Err))
	if err != nil {
		closeLog()
		return nil, cl, nil, err
	}
	return p, cl, func() { closeTunnel(); closeLog() }, nil
}

// planConfirm is a confirmer that shows the plan first; nil with --yes.
func planConfirm(s Streams, yes bool, question string) (func(string) (bool, error), error) {
	ask, err := confirmer(s, yes, ", or --dry-run to see the plan only")
	if err != nil || ask == nil {
		return nil, err
	}
	return func(plan string) (bool, error) {
		fmt.Fprintf(s.Err, "Plan:\n%s\n", strings.TrimRight(plan, "\n"))
		return ask(question)
	}, nil
}

// retiredScheduleRemoval is the membership.SSHRetirer's AlsoOnHost of `etcd member remove` and
// `replace`: a retired member's backup schedule is removed (schedule.Disable, as --disable and
// reset do), since its timer would fail every slot without a member and its delta agent would watch
// a member that is gone. A host without a schedule is left as it is, silently.
func retiredScheduleRemoval(p *ui.Printer) func(context.Context, string, *provision.Client) error {
	return func(ctx context.Context, member string, cli *provision.Client) error {
		removed, err := schedule.Disable(ctx, cli)
		if err != nil {
			return fmt.Errorf("backup schedule: %w", err)
		}
		if len(removed) > 0 {
			p.Hostf(member, "backup schedule removed (its timer would fail every slot without a member)")
		}
		return nil
	}
}
