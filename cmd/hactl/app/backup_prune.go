package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/backup"
)

type backupPruneOptions struct {
	policy backup.Policy
	grace  time.Duration
	dryRun bool
	yes    bool
	output string
}

func newBackupPruneCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupPruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete snapshots outside the retention policy, and stale incomplete uploads",
		Long: `Keeps the union of --keep-last N (newest N), --keep-hourly H (newest of each of the last H hours that
have one, UTC) and --keep-daily D (likewise per day), as restic does, and always the newest verified
snapshot; deletes the rest: metadata first, so a half-deleted snapshot is never listed as complete.
Data objects without metadata and unfinished multipart uploads older than --incomplete-older-than are
removed too. The plan is shown, then confirmed (--yes in scripts); --dry-run only shows it.

Deleting snapshots by an explicit retention policy is the one deletion hactl does. A policy that keeps
nothing is refused (exit 2).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			if err := o.policy.Validate(); err != nil {
				return &UsageError{Err: err}
			}
			if o.grace < 0 {
				return &UsageError{Err: fmt.Errorf("--incomplete-older-than %s: must not be negative", o.grace)}
			}
			var confirm func(string) (bool, error)
			if !o.dryRun {
				var err error
				if confirm, err = confirmer(s, o.yes, ", or --dry-run to only see the plan"); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			env, err := openBackup(ctx, s, g)
			if err != nil {
				return err
			}
			plan, err := backup.PlanRetention(ctx, env.store, backup.RetentionOptions{Prefix: env.c.Spec.Backup.ObjectStore.Prefix, Cluster: env.c.Metadata.Name,
				Policy: o.policy, Grace: o.grace})
			if err != nil {
				return err
			}
			if err := writeReport(s.Out, o.output, plan, plan.Print); err != nil {
				return err
			}
			if o.dryRun || plan.Empty() {
				return nil
			}
			if confirm != nil {
				ok, err := confirm(fmt.Sprintf("delete %d snapshot(s), %d delta(s), %d orphan object(s) and %d incomplete upload(s) from %s?", len(plan.Deletions()), len(plan.Deltas), len(plan.Orphans), len(plan.Incomplete), env.store))
				if err != nil {
					return err
				}
				if !ok {
					env.p.Infof("nothing deleted")
					return nil
				}
			}
			if err := backup.Apply(ctx, env.store, plan, env.p.Infof); err != nil {
				return fmt.Errorf("backup prune: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.policy.KeepLast, "keep-last", 0, "keep the newest N snapshots")
	f.IntVar(&o.policy.KeepHourly, "keep-hourly", 0, "keep the newest snapshot of each of the last H hours (UTC) that have one")
	f.IntVar(&o.policy.KeepDaily, "keep-daily", 0, "keep the newest snapshot of each of the last D days (UTC) that have one")
	f.DurationVar(&o.grace, "incomplete-older-than", time.Hour, "grace period before data objects without metadata and unfinished uploads are removed")
	f.BoolVar(&o.dryRun, "dry-run", false, "show the plan, delete nothing")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation (scripts, scheduled runs)")
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}
