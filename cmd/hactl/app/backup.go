package app

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/take"
	"github.com/hactl/hactl/schedule"
	"github.com/hactl/hactl/ui"
)

func newBackupCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Snapshot etcd into object storage; list, verify and prune the snapshots",
		Long: `Backups live in the S3-compatible bucket of spec.backup, under <prefix>/<metadata.name>/snapshots/.

  hactl backup now -f cluster.yaml                  stream a snapshot of the leader into the bucket
  hactl backup list -f cluster.yaml                 complete snapshots (those with their metadata object)
  hactl backup verify latest --identity-file KEY    download and check one (sha256, etcd's integrity check)
  hactl backup prune --keep-last 288 --keep-daily 14   apply retention (asks first)

The access key comes from the environment variables or the file spec.backup.objectStore.credentials
names; never from the spec, the command line or logs.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBackupNowCommand(s, g), newBackupListCommand(s, g), newBackupVerifyCommand(s, g), newBackupPruneCommand(s, g), newBackupScheduleCommand(s, g), newBackupAgentCommand(s, g))
	return cmd
}

// backupEnv is what every backup subcommand starts from: the spec and the object store.
type backupEnv struct {
	c     *v1alpha1.Cluster
	p     *ui.Printer
	store *backup.S3
}

// openBackup loads the spec and opens spec.backup's object store (backup.OpenStore: exit 2 when
// something is missing locally, 1 when the bucket check fails).
func openBackup(ctx context.Context, s Streams, g *globalOptions) (*backupEnv, error) {
	p := ui.New(s.Err, g.verbose, false)
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return nil, err
	}
	st, err := backup.OpenStore(ctx, c, backup.StoreOptions{Source: g.file, Getenv: os.Getenv})
	if err != nil {
		return nil, err
	}
	return &backupEnv{c: c, p: p, store: st}, nil
}

// openListing is openBackup followed by the listing of the cluster's snapshots.
func openListing(ctx context.Context, s Streams, g *globalOptions) (*backupEnv, *backup.Listing, error) {
	env, err := openBackup(ctx, s, g)
	if err != nil {
		return nil, nil, err
	}
	l, err := backup.ListCluster(ctx, env.store, env.c)
	if err != nil {
		return nil, nil, err
	}
	return env, l, nil
}

type backupNowOptions struct {
	member       string
	onlyIfLeader bool
	slot         string
	output       string
	timeout      time.Duration
	// scheduled are the flags of scheduled runs (schedule_run.go).
	scheduled schedule.RunOptions
}

func newBackupNowCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupNowOptions{}
	cmd := &cobra.Command{
		Use:   "now",
		Short: "Stream a snapshot of one member (the leader by default) into the object store",
		Long: `Streams Maintenance.Snapshot from one member straight into a multipart upload: no temp file, memory
bounded by the part size (at least 8 MiB, chosen from the DB size) × 4 parts in flight whatever the
DB size. sha256 is computed on the fly before and after optional zstd compression and age encryption;
the metadata object, written last, marks the snapshot complete.

--only-if-leader exits 0 without a snapshot when the chosen member is not the leader (scheduled runs
on every member). Exit 0 ok, 1 runtime failure (names the member and step), 2 invalid input.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			if o.timeout <= 0 {
				return &UsageError{Err: fmt.Errorf("--timeout %s: must be a positive duration, e.g. 5s", o.timeout)}
			}
			var err error
			if o.slot, err = o.scheduled.Slot(o.slot, time.Now()); err != nil {
				return err
			}
			if o.slot != "" {
				if _, err := backup.Stem(time.Time{}, 0, "x", o.slot); err != nil {
					return &UsageError{Err: fmt.Errorf("--slot: %w", err)}
				}
			}
			return runBackupNow(cmd.Context(), s, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.member, "member", "", "snapshot this member (an etcd host's name) instead of the leader")
	_ = cmd.RegisterFlagCompletionFunc("member", completeHosts(v1alpha1.RoleEtcd, false))
	f.BoolVar(&o.onlyIfLeader, "only-if-leader", false, "do nothing (exit 0) unless the chosen member is the leader")
	f.StringVar(&o.slot, "slot", "", "scheduled slot, a UTC time like 20261201T030500Z: names the object (one per slot)")
	outputFlag(cmd, &o.output, "output", "")
	f.DurationVar(&o.timeout, "timeout", 5*time.Second, "bound on connecting to each member and on each status request")
	addScheduledRunFlags(f, &o.scheduled)
	return cmd
}

// backupMemoryLimit is the Go runtime's soft memory limit during `backup now` (unless GOMEMLIMIT is
// set): the upload holds up to backup.MinPartSize × backup.DefaultThreads (32 MiB) of parts (one part
// for a DB smaller than a part: backup.Threads) plus the compressor and the etcd client's stream,
// and without a limit the heap grows to twice that before a collection. Measured (stop 34, upload of
// 300 MiB to MinIO alone, 4 parts in flight): 16 MiB parts with a 96 MiB limit peaked at 115 MiB RSS
// (hactl backup now in the lab: 142 MiB, over the 128 MiB goal), 8 MiB parts with this limit at
// 86-88 MiB, at the same throughput.
const backupMemoryLimit = 64 << 20

func runBackupNow(ctx context.Context, s Streams, g *globalOptions, o *backupNowOptions) error {
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(backupMemoryLimit))
	}
	run := schedule.RunRecord{Member: o.member, Start: time.Now()}
	env, err := openBackup(ctx, s, g)
	var rep *take.Report
	var p *ui.Printer
	if err == nil {
		run.Cluster, p = env.c.Metadata.Name, env.p
		rep, err = take.Run(ctx, take.Options{Cluster: env.c, Store: env.store, Member: o.member, OnlyIfLeader: o.onlyIfLeader,
			Slot: o.slot, Timeout: o.timeout, Prune: o.scheduled.Policy, Prompt: terminalPrompter(s.In, s.Err), Printer: env.p, HactlVersion: Version()})
	}
	if rep != nil {
		run.Snapshot = rep.Snapshot
	}
	err = o.scheduled.Record(run, err, p)
	if rep != nil {
		if perr := writeReport(s.Out, o.output, rep, rep.Print); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

type backupListOptions struct{ output string }

func newBackupListCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the complete snapshots (those whose metadata object exists), oldest first",
		Long: `Lists the snapshots under <prefix>/<metadata.name>/snapshots/. Only complete snapshots (whose metadata
object exists and names the data object) are listed; data objects without metadata and unfinished
multipart uploads are counted on stderr (prune cleans them after a grace period) and shown in -o json.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			env, l, err := openListing(cmd.Context(), s, g)
			if err != nil {
				return err
			}
			for _, w := range l.Warnings() {
				env.p.Warnf("%s", w)
			}
			return writeReport(s.Out, o.output, l, l.Print)
		},
	}
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}

// identityEnv is backup.IdentityEnv: the default of --identity-file, in the help texts.
const identityEnv = backup.IdentityEnv

type backupVerifyOptions struct {
	identityFile string
	tempDir      string
	noRecord     bool
	output       string
}

func newBackupVerifyCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupVerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [NAME|KEY|latest]",
		Short: "Download a snapshot and check it: sha256 as stored, decryption, raw sha256, etcd's integrity check",
		Long: `Downloads one complete snapshot (default: the latest) and checks its stored size and sha256 against its
metadata, decrypts it (--identity-file, or the file $` + identityEnv + ` names), decompresses it,
checks the raw sha256 and etcd's own sha256 trailer, then runs etcd's integrity check (etcdutl's
snapshot package: bbolt consistency, key count, hash, revision) on a temp file (--temp-dir needs room
for the DB). A success is recorded in <name>.verified.json: prune never deletes the newest verified
snapshot.

Exit 0 verified, 3 a check failed (named), 2 missing or wrong identity, 1 runtime failure (including
a NAME that does not exist).`,
		ValidArgsFunction: completeSnapshots(false),
		Args:              usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			ref := "latest"
			if len(args) == 1 {
				ref = args[0]
			}
			ids, err := backup.IdentitiesFrom(o.identityFile, os.Getenv)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			env, l, err := openListing(ctx, s, g)
			if err != nil {
				return err
			}
			res, err := backup.VerifyRef(ctx, env.store, l, ref, backup.VerifyOptions{Identities: ids, TempDir: o.tempDir, Record: !o.noRecord, HactlVersion: Version()}, env.p.Infof)
			if err != nil {
				return err
			}
			return writeReport(s.Out, o.output, res, res.Print)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.identityFile, "identity-file", "", "age identity file (AGE-SECRET-KEY-1...) for encrypted snapshots (default $"+identityEnv+")")
	f.StringVar(&o.tempDir, "temp-dir", "", "directory for the temporary DB file (default the system's temp dir)")
	f.BoolVar(&o.noRecord, "no-record", false, "don't write the <name>.verified.json marker")
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}

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
			env, l, err := openListing(ctx, s, g)
			if err != nil {
				return err
			}
			plan := backup.Plan(l, o.policy, time.Now(), o.grace)
			ds, err := backup.ListDeltas(ctx, env.store, env.c.Spec.Backup.ObjectStore.Prefix, env.c.Metadata.Name)
			if err != nil {
				return err
			}
			plan.AddDeltas(ds)
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
