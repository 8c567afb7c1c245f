package app

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/internal/bastion"
	"github.com/hactl/hactl/provision"
)

func newEtcdCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Day-2 operations on the etcd cluster: membership",
		Args:  usageArgs(cobra.NoArgs),
	}
	member := &cobra.Command{
		Use:   "member",
		Short: "Change the etcd cluster's membership safely (quorum-guarded)",
		Args:  usageArgs(cobra.NoArgs),
	}
	member.AddCommand(newEtcdMemberRemoveCommand(s, g))
	cmd.AddCommand(member)
	return cmd
}

type memberRemoveOptions struct {
	force, yes, dryRun bool
	output             string
}

func newEtcdMemberRemoveCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &memberRemoveOptions{}
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an etcd member: quorum guard, leadership moved first, unit stopped, data dir kept aside",
		Long: `Removes the member NAME (its host's name) from the running etcd cluster, as etcd's runtime
reconfiguration guide describes:

  1. refused (exit 2) when the voting members that remain would not have a quorum of them healthy
     (the message does the arithmetic), unless --force; a learner's removal never changes the quorum;
  2. when NAME leads, leadership moves first (MoveLeader) to the healthy voter with the highest raft
     index;
  3. the member is removed through the other members;
  4. on its host (over SSH, when the spec has it): etcd stopped and disabled, the data dir moved to
     DATADIR.removed-<UTC time> (never deleted).

hactl does not edit the spec: delete the host's etcd entry from cluster.yaml afterwards, or the next
'hactl bootstrap' adds the host back as a new member (a learner, promoted once caught up). The
plan is shown and confirmed (--yes in scripts, --dry-run to see it only).

  hactl etcd member remove cp-c -f cluster.yaml --yes`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			name := args[0]
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
						return ask(fmt.Sprintf("Remove etcd member %s?", name))
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
			members, _ := etcd.MembersFromSpec(c)
			ro := membership.RemoveOptions{Cluster: cl, Name: name, Force: o.force, DryRun: o.dryRun, Confirm: confirm, Printer: p}
			inSpec := slices.ContainsFunc(members, func(m etcd.Member) bool { return m.Name == name })
			if inSpec {
				d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: prompt})
				if err != nil {
					return fmt.Errorf("ssh: %w", err)
				}
				defer d.Close()
				ro.Host = membership.SSHRetirer{Spec: c, Dialer: d}
			}
			res, err := membership.Remove(cmd.Context(), ro)
			if res != nil && (err == nil || res.Removed || o.dryRun) {
				if werr := writeReport(s.Out, o.output, res, func(w io.Writer) { printRemoval(w, res, o.dryRun, inSpec, g.file) }); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "remove it even when the remaining members would lose their quorum")
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "show the plan (after reading the cluster) and change nothing")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "table or json")
	return cmd
}

func printRemoval(w io.Writer, r *membership.RemoveResult, dryRun, inSpec bool, file string) {
	if dryRun {
		fmt.Fprintf(w, "plan (dry run, nothing changed):\n%s\n", r.Plan)
		return
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
	if inSpec {
		fmt.Fprintf(w, "%s still lists %s as an etcd host: delete that host entry (or its etcd role), or the next hactl bootstrap adds it back as a new member\n", file, r.Member)
	}
}
