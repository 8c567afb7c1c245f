package app

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd/membership"
)

type memberRemoveOptions struct {
	force, yes, dryRun bool
	output             string
}

func newEtcdMemberRemoveCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &memberRemoveOptions{}
	cmd := &cobra.Command{
		Use:   "remove NAME...",
		Short: "Remove etcd members one at a time: quorum guard, zone check, leadership moved first, units stopped, data dirs kept aside",
		Long: `Removes the members NAME... (their hosts' names) from the running etcd cluster, one at a time, as
etcd's runtime reconfiguration guide describes (5→3 is 'remove etcd-d etcd-e'):

  1. refused (exit 2) before anything changes when a removal, in turn, would leave fewer healthy
     voting members than a quorum of those that remain (the message does the arithmetic), unless
     --force; a learner's removal never changes the quorum;
  2. refused (exit 2) when one zone would hold a quorum of the voting members left (the spec's
     topology rule; spec.etcd.acceptZoneQuorumLoss turns it into a warning); an even count left is a
     warning;
  3. learners first, then followers, the leader last; when a member leads, leadership moves first
     (MoveLeader) to the healthy voter with the highest raft index;
  4. each member is removed through the others once the cluster has a healthy leader again, and the
     quorum guard runs again on the live cluster; the first failure stops, the rest stay untouched;
  5. on its host (over SSH, when the spec has it): etcd stopped and disabled, the data dir moved to
     DATADIR.removed-<UTC time> (never deleted), and its backup schedule (hactl backup schedule)
     removed, as --disable would.

hactl does not edit the spec: delete the hosts' etcd entries from cluster.yaml afterwards, or the
next 'hactl bootstrap' adds them back as new members (learners, promoted once caught up). The plan
is shown and confirmed once (--yes in scripts, --dry-run to see it only).

  hactl etcd member remove cp-c -f cluster.yaml --yes
  hactl etcd member remove etcd-d etcd-e -f cluster.yaml --dry-run`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			var left []string
			for _, n := range hostNames(completionSpec(cmd), v1alpha1.RoleEtcd) {
				if !slices.Contains(args, n) {
					left = append(left, n)
				}
			}
			return left, cobra.ShellCompDirectiveNoFileComp
		},
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			for i, name := range args {
				if strings.TrimSpace(name) == "" {
					return &UsageError{Err: errors.New("NAME: the member's name (its host's name in the spec), e.g. hactl etcd member remove etcd-e")}
				}
				if slices.Contains(args[:i], name) {
					return &UsageError{Err: fmt.Errorf("NAME: %s is named twice; name each member once", name)}
				}
			}
			p, c, _, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			var confirm func(string) (bool, error)
			if !o.dryRun {
				ask, err := confirmer(s, o.yes, ", or --dry-run to see the plan only")
				if err != nil {
					return err
				}
				if ask != nil {
					confirm = func(plan string) (bool, error) {
						fmt.Fprintf(s.Err, "Plan:\n%s\n", plan)
						return ask(fmt.Sprintf("Remove etcd member(s) %s?", strings.Join(args, ", ")))
					}
				}
			}
			res, inSpec, err := membership.ShrinkSpec(cmd.Context(), membership.ShrinkSpecOptions{Spec: c, Names: args,
				Force: o.force, DryRun: o.dryRun, Confirm: confirm, Printer: p, Prompt: terminalPrompter(s.In, s.Err),
				AlsoOnHost: retiredScheduleRemoval(p)})
			if res != nil && (err == nil || len(res.Removals) > 0) {
				if werr := writeReport(s.Out, o.output, res, func(w io.Writer) { printShrink(w, res, o.dryRun, inSpec, g.file) }); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "remove even when the remaining members would lose their quorum (hactl's guard only; etcd's strict reconfiguration check still applies)")
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "show the plan (after reading the cluster) and change nothing")
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}

func printShrink(w io.Writer, res *membership.ShrinkResult, dryRun bool, inSpec []string, file string) {
	if dryRun {
		fmt.Fprintf(w, "plan (dry run, nothing changed):\n%s\n", strings.Join(res.Plan, "\n"))
		return
	}
	for _, r := range res.Removals {
		if !r.Removed {
			continue
		}
		fmt.Fprintf(w, "etcd member %s (ID %s) removed", r.Member, r.ID)
		if r.WasLeader {
			fmt.Fprintf(w, "; leadership moved to %s first", r.NewLeader)
		}
		fmt.Fprintln(w)
		if r.DataDirAside != "" {
			fmt.Fprintf(w, "its data dir is kept as %s on %s\n", r.DataDirAside, r.Member)
		}
		if r.HostError != "" {
			fmt.Fprintf(w, "on %s: %s\n", r.Member, r.HostError)
		}
	}
	fmt.Fprintf(w, "voting members left: %s\n", strings.Join(res.Remaining, ", "))
	if len(inSpec) > 0 {
		fmt.Fprintf(w, "%s still lists %s as etcd host(s): delete those host entries (or their etcd role), or the next hactl bootstrap adds them back as new members\n", file, strings.Join(inSpec, ", "))
	}
}
