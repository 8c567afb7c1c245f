package app

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/join"
	"github.com/hactl/hactl/etcd/membership"
)

type memberReplaceOptions struct {
	with               string
	force, yes, dryRun bool
	acceptNewHostKeys  bool
	waitTimeout        time.Duration
	output             string
}

func newEtcdMemberReplaceCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &memberReplaceOptions{}
	cmd := &cobra.Command{
		Use:   "replace OLD --with NEW",
		Short: "Replace member OLD by a new member on host NEW (learner first, promoted once caught up)",
		Long: `Replaces the etcd member OLD by a new member on NEW, a host of the spec, as etcd's runtime
reconfiguration guide describes. Either edit the spec to the end state first (NEW with role etcd,
OLD without it or without a host entry, e.g. when its host is gone), or leave NEW a host with other
roles and OLD an etcd host: hactl then works on the spec with the etcd role moved.

  1. NEW is added as a learner (no vote), started with the member list etcd returned
     (--initial-cluster-state existing), promoted once its raft log caught up with the leader's, and
     checked serving: the etcd phases of hactl bootstrap for NEW alone (preflight, certificates,
     install), refused if any other member would change;
  2. OLD is removed (leadership moved off it first when it leads); on its host, when reachable, etcd
     is stopped and disabled, the data dir moved aside (never deleted) and its backup schedule
     (hactl backup schedule) removed.

NEW joins first whenever etcd accepts the add, so the voting members never drop below their count.
etcd refuses any add unless a quorum of the voters plus one is healthy: with OLD dead in a
3-member cluster, OLD is removed first (quorum-guarded: the 2 others must be healthy), then NEW
joins. The result is checked against the spec's rules (zone topology) before anything starts.

hactl does not edit the spec: if it did not describe the end state, afterwards give NEW role etcd in
cluster.yaml and drop OLD's etcd role (or its host entry), or the next hactl bootstrap adds OLD back
as a new member. The plan is shown
and confirmed (--yes in scripts, --dry-run to see it only).

  hactl etcd member replace cp-c --with cp-d -f cluster.yaml --yes`,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return hostNames(completionSpec(cmd), v1alpha1.RoleEtcd), cobra.ShellCompDirectiveNoFileComp
		},
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			old := strings.TrimSpace(args[0])
			if old == "" {
				return &UsageError{Err: errors.New("OLD: the member's name (its host's name in the spec), e.g. hactl etcd member replace cp-c --with cp-d")}
			}
			if strings.TrimSpace(o.with) == "" {
				return &UsageError{Err: errors.New("--with NEW is required: the host of the spec that gets the new member")}
			}
			if o.waitTimeout <= 0 { // the join reads 0 as its default
				return &UsageError{Err: fmt.Errorf("--wait %s: must be a positive duration, e.g. 2m", o.waitTimeout)}
			}
			p, c, _, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			res, err := join.Replace(cmd.Context(), join.ReplaceOptions{Spec: c, Old: old, New: o.with, Force: o.force, DryRun: o.dryRun, Printer: p,
				NewConfirm: func() (func(string) (bool, error), error) {
					return planConfirm(s, o.yes || o.dryRun, fmt.Sprintf("Replace etcd member %s by %s?", old, o.with))
				},
				Prompt: terminalPrompter(s.In, s.Err), AcceptNewHostKeys: o.acceptNewHostKeys, WaitTimeout: o.waitTimeout,
				AlsoOnHost: retiredScheduleRemoval(p)})
			if res != nil && len(res.Plan) > 0 && !errors.Is(err, membership.ErrNotConfirmed) && (err == nil || res.Joined || (res.Removal != nil && res.Removal.Removed)) {
				if werr := writeReport(s.Out, o.output, res, func(w io.Writer) { printReplacement(w, res, o.dryRun, g.file, c) }); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&o.with, "with", "", "the host of the spec that gets the new member (required)")
	_ = cmd.RegisterFlagCompletionFunc("with", completeHosts("", false))
	cmd.Flags().BoolVar(&o.force, "force", false, "when OLD must be removed first, remove it even when the remaining members would lose their quorum")
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "show the plan (after reading the cluster) and change nothing")
	cmd.Flags().BoolVar(&o.acceptNewHostKeys, "accept-new-host-keys", false, "append UNKNOWN SSH host keys (NEW's, typically) to the known_hosts file (changed keys are always refused)")
	cmd.Flags().DurationVar(&o.waitTimeout, "wait", 2*time.Minute, "how long to wait for the learner to catch up and for members to be healthy")
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}

func printReplacement(w io.Writer, r *membership.ReplaceResult, dryRun bool, file string, c *v1alpha1.Cluster) {
	if dryRun {
		fmt.Fprintf(w, "plan (dry run, nothing changed):\n  %s\n", strings.Join(r.Plan, "\n  "))
		return
	}
	switch {
	case r.Joined && r.Removal != nil && r.Removal.Removed:
		fmt.Fprintf(w, "etcd member %s (ID %s) replaced by %s (ID %s), %s\n", r.Old, r.OldID, r.New, r.NewID, r.Order)
	case r.Joined:
		fmt.Fprintf(w, "%s joined (ID %s); %s (ID %s) is still a member\n", r.New, r.NewID, r.Old, r.OldID)
	default:
		fmt.Fprintf(w, "%s (ID %s) removed; %s has not joined\n", r.Old, r.OldID, r.New)
	}
	if r.Removal != nil {
		if r.Removal.DataDirAside != "" {
			fmt.Fprintf(w, "%s's data dir is kept as %s\n", r.Old, r.Removal.DataDirAside)
		}
		if r.Removal.HostError != "" {
			fmt.Fprintf(w, "on %s: %s\n", r.Old, r.Removal.HostError)
		}
	}
	if endState := slices.ContainsFunc(c.EtcdHosts(), func(h v1alpha1.Host) bool { return h.Name == r.New }); !endState {
		fmt.Fprintf(w, "now edit %s: give %s role etcd and drop %s's etcd role (or its host entry); until then the next hactl bootstrap would add %s back\n", file, r.New, r.Old, r.Old)
	}
	if c.Spec.Kubernetes != nil {
		fmt.Fprintf(w, "kube-apiserver still lists %s in --etcd-servers and reaches etcd through the others; hactl does not rewrite that list yet (kubeadm upgrade or an edit of the static pod does)\n", r.Old)
	}
}
