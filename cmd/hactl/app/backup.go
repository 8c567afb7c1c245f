package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/specload"
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
	cmd.AddCommand(newBackupNowCommand(s, g), newBackupListCommand(s, g), newBackupVerifyCommand(s, g), newBackupPruneCommand(s, g), newBackupScheduleCommand(s, g))
	return cmd
}

// backupEnv is what every backup subcommand starts from: the spec and the object store.
type backupEnv struct {
	c     *v1alpha1.Cluster
	p     *ui.Printer
	store *backup.S3
}

// openBackup loads the spec, checks spec.backup's files and environment (exit 2 when something is
// missing) and the bucket (exit 1: it is found remotely).
func openBackup(ctx context.Context, s Streams, g *globalOptions) (*backupEnv, error) {
	p := ui.New(s.Err, g.verbose, false)
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, c, g.file, "")
	if err != nil {
		return nil, err
	}
	return &backupEnv{c: c, p: p, store: st}, nil
}

// openStore opens spec.backup's object store (bucket overrides its bucket when not ""): spec.backup
// missing, its files or environment incomplete → *UsageError (exit 2); the bucket check fails →
// its *backup.BucketError (exit 1).
func openStore(ctx context.Context, c *v1alpha1.Cluster, file, bucket string) (*backup.S3, error) {
	if c.Spec.Backup == nil {
		return nil, &UsageError{Err: fmt.Errorf("%s: spec.backup is not set: add spec.backup.objectStore (endpoint, bucket, credentials) to back up (`hactl init` shows an example)", file)}
	}
	if err := c.ValidationError(file, append(specload.ValidateBackupFiles(c), specload.ValidateBackupEnvironment(c, os.Getenv)...)); err != nil {
		return nil, err
	}
	cfg, err := backup.S3ConfigFromSpec(c, os.Getenv)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	if bucket != "" {
		cfg.Bucket = bucket
	}
	st, err := backup.NewS3(cfg)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	if err := st.CheckBucket(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// readIdentities reads the age identities of --identity-file (or $HACTL_AGE_IDENTITY_FILE); none
// when neither is set. A bad file is a *UsageError.
func readIdentities(flag string) ([]age.Identity, error) {
	if flag == "" {
		flag = os.Getenv(identityEnv)
	}
	if flag == "" {
		return nil, nil
	}
	ids, err := backup.ReadIdentities(flag)
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("--identity-file: %w", err)}
	}
	return ids, nil
}

// openListing is openBackup followed by the listing of the cluster's snapshots.
func openListing(ctx context.Context, s Streams, g *globalOptions) (*backupEnv, *backup.Listing, error) {
	env, err := openBackup(ctx, s, g)
	if err != nil {
		return nil, nil, err
	}
	l, err := backup.List(ctx, env.store, env.c.Spec.Backup.ObjectStore.Prefix, env.c.Metadata.Name)
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
	scheduled scheduledRunOptions
}

// BackupNowReport is `hactl backup now -o json`.
type BackupNowReport struct {
	// Skipped says why no snapshot was taken (--only-if-leader on a follower); then Snapshot is nil.
	Skipped  string           `json:"skipped,omitempty"`
	Snapshot *backup.Metadata `json:"snapshot,omitempty"`
}

func newBackupNowCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupNowOptions{}
	cmd := &cobra.Command{
		Use:   "now",
		Short: "Stream a snapshot of one member (the leader by default) into the object store",
		Long: `Streams Maintenance.Snapshot from one member straight into a multipart upload: no temp file, memory
bounded by the part size (at least 16 MiB, chosen from the DB size) × 4 parts in flight whatever the
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
			if err := o.scheduled.resolveSlot(&o.slot, time.Now()); err != nil {
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
	f.BoolVar(&o.onlyIfLeader, "only-if-leader", false, "do nothing (exit 0) unless the chosen member is the leader")
	f.StringVar(&o.slot, "slot", "", "scheduled slot, a UTC time like 20261201T030500Z: names the object (one per slot)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 5*time.Second, "bound on connecting to each member and on each status request")
	o.scheduled.addFlags(f)
	return cmd
}

// backupMemoryLimit is the Go runtime's soft memory limit during `backup now` (unless GOMEMLIMIT is
// set): the upload holds about backup.MinPartSize × backup.DefaultThreads (64 MiB) of parts plus the
// compressor, and without a limit the heap grows to twice that before a collection (measured in the
// lab: ~170 MiB peak RSS uncompressed, ~210 MiB with zstd, whatever the DB size; with this limit
// ~115 and ~125 MiB, under the 128 MiB goal).
const backupMemoryLimit = 96 << 20

func runBackupNow(ctx context.Context, s Streams, g *globalOptions, o *backupNowOptions) error {
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(backupMemoryLimit))
	}
	start := time.Now()
	env, rep, err := takeBackup(ctx, s, g, o)
	return o.scheduled.finish(ctx, env, o.member, start, rep, err, func() error { return writeNowReport(s.Out, o.output, rep) })
}

// takeBackup is `backup now` up to the stored snapshot (or the reason none was taken); env is nil
// when the spec or the object store could not be opened.
func takeBackup(ctx context.Context, s Streams, g *globalOptions, o *backupNowOptions) (*backupEnv, *BackupNowReport, error) {
	env, err := openBackup(ctx, s, g)
	if err != nil {
		return nil, nil, err
	}
	c := env.c
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return env, nil, err
	}
	if o.member != "" {
		var names []string
		for _, m := range members {
			names = append(names, m.Name)
		}
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+o.member+",") {
			return env, nil, &UsageError{Err: fmt.Errorf("--member %q: not an etcd member of the spec; members: %s", o.member, strings.Join(names, ", "))}
		}
	}
	recipients, err := specload.BackupRecipients(c)
	if err != nil {
		return env, nil, &UsageError{Err: err}
	}
	tunnel, err := provision.TunnelFromSpec(c, provision.SpecOptions{Prompt: terminalPrompter(s.In, s.Err)})
	if err != nil {
		return env, nil, err
	}
	var dial etcd.Option
	if tunnel != nil {
		defer tunnel.Close()
		dial = etcd.WithDialer(tunnel.DialTCP)
	}
	files := clientTLSFiles(c)
	st, err := etcd.StatusWithTimeout(ctx, etcd.ClientURLs(members), files, o.timeout, o.timeout, dial)
	if err != nil {
		return env, nil, fmt.Errorf("backup now: status of cluster %s: %w", c.Metadata.Name, err)
	}
	var chosen *etcd.EndpointStatus
	for i := range st.Endpoints {
		ep := &st.Endpoints[i]
		if (o.member == "" && ep.Reachable && ep.IsLeader) || (o.member != "" && ep.Endpoint == clientURLOf(members, o.member)) {
			chosen = ep
		}
	}
	switch {
	case chosen == nil:
		return env, nil, fmt.Errorf("backup now: no reachable member of cluster %s is the leader (no quorum?); pick one with --member", c.Metadata.Name)
	case !chosen.Reachable:
		return env, nil, fmt.Errorf("backup now: member %s (%s) is unreachable: %s", o.member, chosen.Endpoint, chosen.Error)
	}
	name := chosen.MemberName
	if name == "" {
		name = o.member
	}
	if o.onlyIfLeader && !chosen.IsLeader {
		rep := &BackupNowReport{Skipped: fmt.Sprintf("member %s is not the leader (leader: %s): no snapshot taken", name, dash(st.LeaderName))}
		env.p.Infof("%s", rep.Skipped)
		return env, rep, nil
	}
	cli, err := etcd.NewClient(ctx, []string{chosen.Endpoint}, files, o.timeout, dial)
	if err != nil {
		return env, nil, err
	}
	defer cli.Close()
	b := c.Spec.Backup
	m, err := backup.Take(ctx, cli, chosen.Endpoint, env.store, backup.TakeOptions{
		Cluster: c.Metadata.Name, Prefix: b.ObjectStore.Prefix, Member: name, Slot: o.slot,
		Compression: b.Compression, Recipients: recipients, HactlVersion: Version(),
		Progress: func(format string, args ...any) { env.p.Infof(format, args...) },
	})
	if err != nil {
		return env, nil, fmt.Errorf("backup now: %w", err)
	}
	return env, &BackupNowReport{Snapshot: m}, nil
}

// writeNowReport prints `backup now`'s result (nothing in a table for a skipped run: stderr said why).
func writeNowReport(w io.Writer, output string, rep *BackupNowReport) error {
	return writeReport(w, output, rep, func(w io.Writer) {
		if m := rep.Snapshot; m != nil {
			ui.Table(w, []string{"KEY", "REVISION", "MEMBER", "DB SIZE", "STORED", "SHA256"}, [][]string{{
				m.Key, fmt.Sprint(m.Revision), m.MemberName, fmt.Sprint(m.DBSizeBytes), fmt.Sprint(m.StoredSizeBytes), m.StoredSHA256,
			}})
		}
	})
}

func clientURLOf(members []etcd.Member, name string) string {
	for _, m := range members {
		if m.Name == name {
			return m.ClientURL()
		}
	}
	return ""
}

// clientTLSFiles are hactl's etcd client certificate in the state dir.
func clientTLSFiles(c *v1alpha1.Cluster) etcd.TLSFiles {
	pkiDir := filepath.Join(c.Spec.StateDir, "pki")
	return etcd.TLSFiles{CA: pki.CertPath(pkiDir, pki.CABase), Cert: pki.CertPath(pkiDir, pki.HactlClient), Key: pki.KeyPath(pkiDir, pki.HactlClient)}
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
			if n := len(l.Orphans) + len(l.Incomplete); n > 0 {
				env.p.Warnf("%d data object(s) without metadata and %d unfinished upload(s) under %s are not snapshots (prune removes them after --incomplete-older-than)", len(l.Orphans), len(l.Incomplete), l.Prefix)
			}
			for _, pr := range l.Problems {
				env.p.Warnf("unreadable metadata: %s", pr)
			}
			return writeReport(s.Out, o.output, l, func(w io.Writer) { printSnapshots(w, l) })
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

func printSnapshots(w io.Writer, l *backup.Listing) {
	if len(l.Snapshots) == 0 {
		fmt.Fprintf(w, "no complete snapshot under %s\n", l.Prefix)
		return
	}
	var rows [][]string
	for _, sn := range l.Snapshots {
		m := sn.Metadata
		enc, ver := "no", "-"
		if m.Encrypted() {
			enc = "age"
		}
		if sn.Verified != nil {
			ver = sn.Verified.VerifiedAt.UTC().Format(time.RFC3339)
		}
		rows = append(rows, []string{sn.Time.UTC().Format(time.RFC3339), fmt.Sprint(m.Revision), m.MemberName,
			fmt.Sprint(m.StoredSizeBytes), m.Compression, enc, ver, sn.Stem})
	}
	ui.Table(w, []string{"TIME", "REVISION", "MEMBER", "STORED BYTES", "COMPRESSION", "ENCRYPTED", "VERIFIED", "NAME"}, rows)
}

type backupVerifyOptions struct {
	identityFile string
	tempDir      string
	noRecord     bool
	output       string
}

// identityEnv names the environment variable holding the path of the age identity file.
const identityEnv = "HACTL_AGE_IDENTITY_FILE"

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
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			ref := "latest"
			if len(args) == 1 {
				ref = args[0]
			}
			ids, err := readIdentities(o.identityFile)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			env, l, err := openListing(ctx, s, g)
			if err != nil {
				return err
			}
			sn := l.Latest()
			if ref != "latest" {
				sn = l.Find(ref)
			}
			if sn == nil {
				return fmt.Errorf("backup verify: no complete snapshot %q under %s (see `hactl backup list`)", ref, l.Prefix)
			}
			env.p.Infof("verifying %s (revision %d, %d bytes stored)", sn.Data.Key, sn.Metadata.Revision, sn.Metadata.StoredSizeBytes)
			res, err := backup.Verify(ctx, env.store, sn, backup.VerifyOptions{Identities: ids, TempDir: o.tempDir, Record: !o.noRecord, HactlVersion: Version()})
			var me *backup.MismatchError
			switch {
			case errors.As(err, &me):
				return &VerdictError{Err: err}
			case errors.Is(err, backup.ErrNoIdentity), errors.Is(err, backup.ErrWrongIdentity):
				return &UsageError{Err: err}
			case err != nil:
				return fmt.Errorf("backup verify: %w", err)
			}
			return writeReport(s.Out, o.output, res, func(w io.Writer) {
				fmt.Fprintf(w, "%s: OK (revision %d, %d keys, hash %d, %d bytes, in %s)\n", res.Key, res.Revision, res.TotalKeys, res.Hash, res.TotalSizeBytes, res.Duration.Round(time.Millisecond))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.identityFile, "identity-file", "", "age identity file (AGE-SECRET-KEY-1...) for encrypted snapshots (default $"+identityEnv+")")
	f.StringVar(&o.tempDir, "temp-dir", "", "directory for the temporary DB file (default the system's temp dir)")
	f.BoolVar(&o.noRecord, "no-record", false, "don't write the <name>.verified.json marker")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
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
			if err := writeReport(s.Out, o.output, plan, func(w io.Writer) { printPrunePlan(w, l, plan) }); err != nil {
				return err
			}
			n := len(plan.Deletions()) + len(plan.Orphans) + len(plan.Incomplete)
			if o.dryRun || n == 0 {
				return nil
			}
			if confirm != nil {
				ok, err := confirm(fmt.Sprintf("delete %d snapshot(s), %d orphan object(s) and %d incomplete upload(s) from %s?", len(plan.Deletions()), len(plan.Orphans), len(plan.Incomplete), env.store))
				if err != nil {
					return err
				}
				if !ok {
					env.p.Infof("nothing deleted")
					return nil
				}
			}
			if err := backup.Apply(ctx, env.store, plan, func(format string, args ...any) { env.p.Infof(format, args...) }); err != nil {
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
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

func printPrunePlan(w io.Writer, l *backup.Listing, plan *backup.PrunePlan) {
	var rows [][]string
	for _, d := range plan.Decisions {
		action := "delete"
		if d.Keep {
			action = "keep"
		}
		rows = append(rows, []string{action, d.Time.UTC().Format(time.RFC3339), strings.TrimPrefix(d.Key, l.Prefix), dash(strings.Join(d.Reasons, ", "))})
	}
	if len(rows) > 0 {
		ui.Table(w, []string{"ACTION", "TIME", "OBJECT", "KEPT BY"}, rows)
	}
	for _, o := range plan.Orphans {
		fmt.Fprintf(w, "delete orphan %s (no metadata, modified %s)\n", o.Key, o.LastModified.UTC().Format(time.RFC3339))
	}
	for _, u := range plan.Incomplete {
		fmt.Fprintf(w, "abort incomplete upload %s (started %s)\n", u.Key, u.Initiated.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "%d kept, %d to delete\n", len(plan.Decisions)-len(plan.Deletions()), len(plan.Deletions()))
}
