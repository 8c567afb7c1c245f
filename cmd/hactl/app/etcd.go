package app

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd/maintenance"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/internal/bastion"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

func newEtcdCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Day-2 operations on the etcd cluster: membership, compaction, defragmentation, alarms",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newEtcdMemberCommand(s, g), newEtcdDefragCommand(s, g), newEtcdCompactCommand(s, g), newEtcdAlarmCommand(s, g))
	return cmd
}

func newEtcdMemberCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "Change the etcd cluster's membership safely (quorum-guarded)",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newEtcdMemberRemoveCommand(s, g), newEtcdMemberReplaceCommand(s, g))
	return cmd
}

func newEtcdAlarmCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alarm",
		Short: "List or disarm etcd's alarms (NOSPACE recovered in etcd's order)",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newEtcdAlarmListCommand(s, g), newEtcdAlarmDisarmCommand(s, g))
	return cmd
}

// etcdAccess loads the spec and opens what reaching its members takes (the bastion, when there is
// one); close releases both.
func etcdAccess(s Streams, g *globalOptions) (p *ui.Printer, cl membership.Cluster, closeFn func(), err error) {
	p, c, _, closeLog, err := hostRun(s, g)
	if err != nil {
		return nil, cl, nil, err
	}
	tunnel, err := bastion.Open(c, terminalPrompter(s.In, s.Err))
	if err != nil {
		closeLog()
		return nil, cl, nil, fmt.Errorf("ssh: %w", err)
	}
	if cl, err = membership.ClusterFromSpec(c, tunnel.Etcd()); err != nil {
		tunnel.Close()
		closeLog()
		return nil, cl, nil, &UsageError{Err: err}
	}
	return p, cl, func() { tunnel.Close(); closeLog() }, nil
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

func newEtcdDefragCommand(s Streams, g *globalOptions) *cobra.Command {
	var minFrag float64
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "defrag",
		Short: "Defragment the members one at a time, followers first, the leader last",
		Long: `Defragments each member's database (its free pages given back to the filesystem), one member at
a time because a member blocks its reads and writes while it defragments: followers first, the
leader last, each checked serving again before the next. Members under --min-fragmentation (the
share of the database file not in use, as hactl status shows it) are skipped. Every member must be
healthy first. Compact first (hactl etcd compact) for the history's pages to be free.

  hactl etcd defrag -f cluster.yaml --min-fragmentation 30 --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			if err := maintenance.ValidateMinFragmentation(minFrag); err != nil {
				return err
			}
			confirm, err := planConfirm(s, yes || dryRun, "Defragment?")
			if err != nil {
				return err
			}
			p, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := maintenance.Defrag(cmd.Context(), maintenance.DefragOptions{Cluster: cl, MinFragmentation: minFrag, DryRun: dryRun, Confirm: confirm, Printer: p})
			if res != nil && len(res.Members) > 0 && !errors.Is(err, maintenance.ErrNotConfirmed) {
				if werr := writeReport(s.Out, output, res, func(w io.Writer) { printDefrag(w, res) }); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	cmd.Flags().Float64Var(&minFrag, "min-fragmentation", 0, "skip members with less of their database file free than this, in percent (0-100; default 0: every member)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the order and the fragmentation, change nothing")
	outputFlag(cmd, &output, "output", "")
	return cmd
}

func printDefrag(w io.Writer, r *maintenance.DefragResult) {
	var rows [][]string
	for _, m := range r.Members {
		role, after, took := "follower", "-", "-"
		if m.Leader {
			role = "leader"
		}
		if m.Skipped == "" {
			after, took = fmt.Sprintf("%.1f MiB", float64(m.AfterBytes)/(1<<20)), fmt.Sprintf("%.0fms", m.DurationMs)
		} else {
			after = "skipped: " + m.Skipped
		}
		rows = append(rows, []string{m.Name, role, fmt.Sprintf("%.1f MiB", float64(m.BeforeBytes)/(1<<20)), fmt.Sprintf("%.1f%%", m.FragmentationPercent), after, took})
	}
	ui.Table(w, []string{"MEMBER", "ROLE", "DB BEFORE", "FREE", "DB AFTER", "TOOK"}, rows)
}

func newEtcdCompactCommand(s Streams, g *globalOptions) *cobra.Command {
	var retain int64
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Compact the keyspace's history, keeping the --retain most recent revisions",
		Long: `Compacts etcd's history to the current revision minus --retain: every older revision of every key
is dropped (watchers and reads of those revisions get "required revision has been compacted").
Physical: it returns once the backend dropped them; 'hactl etcd defrag' then gives the space back.
kube-apiserver compacts every 5 minutes itself; this is for a cluster without it or a NOSPACE
recovery (hactl etcd alarm disarm runs it).

  hactl etcd compact -f cluster.yaml --retain 1000 --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			if !cmd.Flags().Changed("retain") {
				return &UsageError{Err: errors.New("--retain N is required: the number of most recent revisions to keep (--retain 0 drops every older revision of every key)")}
			}
			if err := maintenance.ValidateRetain(retain); err != nil {
				return err
			}
			if dryRun {
				fmt.Fprintf(s.Out, "plan (dry run, nothing changed): compact etcd's history to the current revision minus %d; every older revision of every key is dropped\n", retain)
				return nil
			}
			ask, err := confirmer(s, yes, ", or --dry-run to see the plan only")
			if err != nil {
				return err
			}
			if ask != nil {
				ok, err := ask(fmt.Sprintf("Compact etcd's history, keeping the %d most recent revisions?", retain))
				if err != nil {
					return err
				}
				if !ok {
					return maintenance.ErrNotConfirmed
				}
			}
			_, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := maintenance.Compact(cmd.Context(), cl, retain)
			if res != nil {
				if werr := writeReport(s.Out, output, res, func(w io.Writer) {
					if res.Skipped != "" {
						fmt.Fprintf(w, "nothing compacted: %s\n", res.Skipped)
						return
					}
					fmt.Fprintf(w, "compacted to revision %d (current %d, %d retained)\n", res.CompactedTo, res.Revision, res.Retained)
				}); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&retain, "retain", 0, "most recent revisions to keep (required; 0 keeps only the current one)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be compacted, change nothing")
	outputFlag(cmd, &output, "output", "")
	return cmd
}

func newEtcdAlarmListCommand(s Streams, g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the active alarms (NOSPACE, CORRUPT) with their members",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			_, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			as, err := maintenance.Alarms(cmd.Context(), cl)
			if err != nil {
				return err
			}
			return writeReport(s.Out, output, as, func(w io.Writer) { printAlarms(w, as) })
		},
	}
	outputFlag(cmd, &output, "output", "")
	return cmd
}

func printAlarms(w io.Writer, as []maintenance.Alarm) {
	if len(as) == 0 {
		fmt.Fprintln(w, "no active alarm")
		return
	}
	var rows [][]string
	for _, a := range as {
		rows = append(rows, []string{a.Alarm, a.Member, a.MemberID})
	}
	ui.Table(w, []string{"ALARM", "MEMBER", "MEMBER-ID"}, rows)
}

func newEtcdAlarmDisarmCommand(s Streams, g *globalOptions) *cobra.Command {
	var retain int64
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "disarm",
		Short: "Clear the active alarms; NOSPACE: compact, defragment every member, then disarm",
		Long: `Clears the active alarms. For NOSPACE (the database reached its quota; etcd then refuses writes)
it runs etcd's recovery in order, after the plan is confirmed: compact the history (keeping
--retain revisions), defragment every member one at a time with the leader last, then disarm; an
alarm etcd raises again (the data itself is over the quota: raise spec.etcd's quota) is reported.
A CORRUPT alarm is never disarmed by hactl (exit 3): replace that member or restore.

  hactl etcd alarm disarm -f cluster.yaml --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			if err := maintenance.ValidateRetain(retain); err != nil {
				return err
			}
			confirm, err := planConfirm(s, yes || dryRun, "Run it?")
			if err != nil {
				return err
			}
			p, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := maintenance.Disarm(cmd.Context(), maintenance.DisarmOptions{Cluster: cl, Retain: retain, DryRun: dryRun, Confirm: confirm, Printer: p})
			if res != nil && !errors.Is(err, maintenance.ErrNotConfirmed) {
				if werr := writeReport(s.Out, output, res, func(w io.Writer) {
					fmt.Fprint(w, res.Plan)
					if len(res.Disarmed) > 0 {
						fmt.Fprintf(w, "disarmed %d alarm(s)\n", len(res.Disarmed))
					}
					if len(res.Remaining) > 0 {
						fmt.Fprintln(w, "still active:")
						printAlarms(w, res.Remaining)
					}
				}); werr != nil {
					return werr
				}
			}
			if err == nil && len(res.Remaining) > 0 {
				return &VerdictError{Err: fmt.Errorf("%d alarm(s) still active after the recovery: the data itself exceeds the quota; raise it or delete data", len(res.Remaining))}
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&retain, "retain", 0, "NOSPACE: most recent revisions the compaction keeps (default 0: only the current one)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the plan, change nothing")
	outputFlag(cmd, &output, "output", "")
	return cmd
}

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
     DATADIR.removed-<UTC time> (never deleted).

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
			prompt := terminalPrompter(s.In, s.Err)
			tunnel, err := bastion.Open(c, prompt)
			if err != nil {
				return fmt.Errorf("ssh: %w", err)
			}
			defer tunnel.Close()
			cl, err := membership.ClusterFromSpec(c, tunnel.Etcd())
			if err != nil {
				return &UsageError{Err: err}
			}
			so := membership.ShrinkOptions{Cluster: cl, Names: args, Zones: map[string]string{}, AcceptZoneQuorumLoss: c.Spec.Etcd.AcceptZoneQuorumLoss,
				Force: o.force, DryRun: o.dryRun, Confirm: confirm, Printer: p}
			var inSpec []string
			for _, h := range c.Spec.Hosts {
				if h.HasRole(v1alpha1.RoleEtcd) {
					so.Zones[h.Name] = h.Zone
					if slices.Contains(args, h.Name) {
						inSpec = append(inSpec, h.Name)
					}
				}
			}
			if len(inSpec) > 0 {
				d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: prompt})
				if err != nil {
					return fmt.Errorf("ssh: %w", err)
				}
				defer d.Close()
				so.Host = membership.SSHRetirer{Spec: c, Dialer: d}
			}
			res, err := membership.Shrink(cmd.Context(), so)
			if res != nil {
				if ferr := forgetRemoved(c, res.Removals...); ferr != nil {
					err = multierror.Append(err, ferr).ErrorOrNil()
				}
			}
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

// forgetRemoved drops the removed members' records from the state dir (state.ForgetRemoved), so
// their hosts join later as new members (hactl etcd member replace --with, hactl bootstrap).
func forgetRemoved(c *v1alpha1.Cluster, removals ...*membership.RemoveResult) error {
	removed := map[string]string{}
	for _, r := range removals {
		if r != nil && r.Removed {
			removed[r.Member] = r.ID
		}
	}
	if len(removed) == 0 {
		return nil
	}
	if err := state.ForgetRemoved(c.Spec.StateDir, removed); err != nil {
		return fmt.Errorf("state dir %s: the removed members' records stay: %w", c.Spec.StateDir, err)
	}
	return nil
}
