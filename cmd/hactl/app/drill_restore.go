package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/bootstrap/restore"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

type drillRestoreOptions struct {
	maxRTO, maxRPO, warmup time.Duration
	rate                   int
	reqTimeout             time.Duration
	identityFile, tempDir  string
	noHostFetch            bool
	caFile                 string
	report                 string
	onto                   string
	keepFenced             bool
	force, yes, dryRun     bool
	output                 string
}

func newDrillRestoreCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &drillRestoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Disaster-recovery rehearsal: stop every member, restore from the newest snapshot; measured RTO and RPO",
		Long: `The drill an auditor asks for. With the drills' workload writing (--rate puts per second, each with
a --request-timeout deadline), it declares a disaster at t0 by killing etcd on EVERY member at once
(SIGKILL, as a crash would; the units then held stopped), then
restores the whole cluster from the newest complete snapshot in spec.backup's object store, as
'hactl restore --from latest' does: downloaded and verified here, shipped to every member, each
data dir moved aside (kept as <dataDir>.pre-restore-<time>), rebuilt with a new cluster token and
revisions bumped, all members started together; with control-plane hosts in the spec, kubelet
stopped and the kube-apiservers, controller-managers and schedulers killed before etcd stops,
kubelet started again after (restore/hold, restore/release).

  RTO  t0 → the first write acknowledged by the restored cluster (budget --max-rto, default 2m)
  RPO  t0 → the newest acknowledged write the restored cluster holds (budget --max-rpo, default
       5m); when the snapshot predates the workload, t0 → the snapshot's start

With Kubernetes behind the VIP (spec.kubernetes, spec.loadBalancer) and the kube-apiserver CA
(--ca-file or spec.loadBalancer.healthCheck.caFile), GET https://VIP/readyz is polled every 20 ms on
fresh connections and t0 → its first 200 after the restore is reported too, within --max-rto as well
(it includes the kube-apiservers' restart by restore/release).

Every acknowledged key is read back: writes acknowledged after the snapshot are lost by design (the
report counts them and gives their window); a write missing from before the restored point, or one
acknowledged by the restored cluster and missing, fails the drill. The drill is refused (exit 3,
nothing touched) when the newest snapshot is older than --max-rpo, and like every drill on an
unhealthy cluster (--force) or an earlier drill's leftovers.

With --onto new-hosts.yaml the disaster is the loss of the machines: the members are fenced first (a
systemd drop-in, /etc/systemd/system/etcd.service.d/50-hactl-fenced.conf, makes every start of etcd
fail, reboots included), then killed, and a NEW cluster is built from the snapshot on the hosts of
new-hosts.yaml (its own state dir and CA; etcd and its load balancer, no Kubernetes), as
'hactl bootstrap -f new-hosts.yaml --restore-from latest' does; the workload then writes there. Those
hosts are checked (bootstrap's preflight, dry run) before anything is touched. After the read-back
the old members are unfenced and etcd started there again, so the rehearsal ends with both clusters
running ('hactl reset -f new-hosts.yaml' removes the new one); --keep-fenced leaves them fenced (a
real failover). Their data dirs are never touched.

Exit codes: 0 within both budgets; 3 refused, over a budget or a write lost that the restore had to
keep; 2 bad flags; 1 a runtime failure (if the restore failed before touching a data dir etcd is
started again; after that, hactl restore puts every previous data dir back).

  hactl drill restore --yes
  hactl drill restore --max-rto 90s --max-rpo 1m --report dr.json --yes
  hactl drill restore --onto dr-site.yaml --report dr.json --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runDrillRestore(cmd, s, g, o) },
	}
	f := cmd.Flags()
	f.DurationVar(&o.maxRTO, "max-rto", drill.DefaultRestoreMaxRTO, "fail (exit 3) when the RTO exceeds this")
	f.DurationVar(&o.maxRPO, "max-rpo", drill.DefaultRestoreMaxRPO, "fail (exit 3) when the RPO exceeds this; refuse when the newest snapshot is older")
	f.DurationVar(&o.warmup, "warmup", drill.DefaultRestoreWarmup, "how long the workload writes before the disaster")
	f.IntVar(&o.rate, "rate", drill.DefaultRate, "workload puts per second (the RTO's resolution is 1/rate)")
	f.DurationVar(&o.reqTimeout, "request-timeout", drill.DefaultRequestTimeout, "deadline of each workload request")
	f.StringVar(&o.identityFile, "identity-file", "", "age identity file for encrypted backups (default $"+identityEnv+")")
	f.StringVar(&o.tempDir, "temp-dir", "", "where the snapshot is verified and kept during the restore (default the system's temp dir)")
	f.BoolVar(&o.noHostFetch, "no-host-fetch", false, noHostFetchUsage)
	f.StringVar(&o.caFile, "ca-file", "", "kube-apiserver CA: also measure readyz through the VIP (default spec.loadBalancer.healthCheck.caFile)")
	f.StringVar(&o.report, "report", "", "also write the JSON report to this file")
	f.StringVar(&o.onto, "onto", "", "rebuild the cluster from the snapshot on the hosts of this spec while the members are fenced (disaster recovery onto other machines)")
	f.BoolVar(&o.keepFenced, "keep-fenced", false, "with --onto: leave the old members fenced after the drill (a real failover)")
	f.BoolVar(&o.force, "force", false, "run although preflight found the cluster unhealthy (never with an earlier drill's leftovers)")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation (scripts, CI)")
	f.BoolVar(&o.dryRun, "dry-run", false, "show the plan (after the read-only preflight) and stop")
	outputFlag(cmd, &o.output, "report", " on stdout (progress goes to stderr)")
	return cmd
}

func runDrillRestore(cmd *cobra.Command, s Streams, g *globalOptions, o *drillRestoreOptions) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{"max-rto": o.maxRTO, "max-rpo": o.maxRPO, "warmup": o.warmup, "request-timeout": o.reqTimeout} {
		if d <= 0 {
			return &UsageError{Err: fmt.Errorf("--%s %s: must be a positive duration", name, d)}
		}
	}
	if o.rate <= 0 {
		return &UsageError{Err: fmt.Errorf("--rate %d: must be between 1 and 1000 puts per second", o.rate)}
	}
	p, c, logPath, closeLog, err := hostRun(s, g)
	if err != nil {
		return err
	}
	defer closeLog()
	if c.Spec.Backup == nil {
		return &UsageError{Err: fmt.Errorf("%s: spec.backup is not set: the restore drill restores from its object store; add spec.backup (see `hactl init`) and take a snapshot first", g.file)}
	}
	if de := c.Spec.Backup.DeltaEvery.Duration; o.maxRPO < de {
		return &UsageError{Err: fmt.Errorf("--max-rpo %s is shorter than spec.backup.deltaEvery %s: the newest stored change can be that old, so the drill could only fail; raise --max-rpo or lower deltaEvery", o.maxRPO, de)}
	}
	if _, err := backup.IdentitiesFrom(o.identityFile, os.Getenv); err != nil {
		return err
	}
	var onto *v1alpha1.Cluster
	if o.onto != "" {
		if onto, err = loadForHosts(&globalOptions{file: o.onto, verbose: g.verbose}, p); err != nil {
			return err
		}
	}
	do := &drill.Options{Cluster: c, Kind: drill.Restore, Count: 1, MaxRTO: o.maxRTO, MaxRPO: o.maxRPO, Warmup: o.warmup,
		Rate: o.rate, RequestTimeout: o.reqTimeout, CAFile: o.caFile, Force: o.force, DryRun: o.dryRun, Report: o.report, Printer: p,
		Onto: onto, OntoFile: o.onto, KeepFenced: o.keepFenced,
		Prompt: terminalPrompter(s.In, s.Err),
		Restorer: &drillRestorer{c: c, p: p, specFile: g.file, identityFile: o.identityFile, tempDir: o.tempDir, noHostFetch: o.noHostFetch, prompt: terminalPrompter(s.In, s.Err),
			onto: onto, ontoFile: o.onto}}
	return validateAndRun(cmd, s, do, o.yes, o.output, logPath)
}

// drillRestorer is the restore drill's drill.Restorer: the newest snapshot of spec.backup's store,
// restored as `hactl restore --from latest --force --yes` does.
type drillRestorer struct {
	c                     *v1alpha1.Cluster
	p                     *ui.Printer
	specFile              string
	identityFile, tempDir string
	noHostFetch           bool
	prompt                provision.Prompter
	// onto is the --onto spec (nil: restore in place).
	onto     *v1alpha1.Cluster
	ontoFile string
}

// Preflight checks the --onto hosts with a dry run of bootstrap --restore-from (SSH, host facts,
// ports, empty data dirs, no cluster recorded in its state dir); nothing to check in place.
func (d *drillRestorer) Preflight(ctx context.Context, snap *drill.SnapshotRef) error {
	if d.onto == nil {
		return nil
	}
	seed := &restore.Options{Snapshot: snap.Key, SHA256: "pending", Revision: snap.Revision}
	// Its phase-by-phase output goes to the debug log only: the drill's own plan says what follows.
	if _, err := bootstrapSeeded(ctx, d.onto, d.p.Quiet(), d.prompt, seed, true); err != nil {
		return fmt.Errorf("--onto %s: %w", d.ontoFile, err)
	}
	d.p.Infof("--onto %s: preflight passed (a dry run of bootstrap --restore-from on its %d hosts: reachable, new, nothing to refuse)", d.ontoFile, len(d.onto.Spec.Hosts))
	return nil
}

// Newest is drill.NewestSnapshot of the drilled cluster.
func (d *drillRestorer) Newest(ctx context.Context) (*drill.SnapshotRef, error) {
	return drill.NewestSnapshot(ctx, d.c, d.specFile)
}

func (d *drillRestorer) Restore(ctx context.Context) (*drill.RestoreRun, error) {
	src, err := backup.ParseSource("--from", "latest")
	if err != nil {
		return nil, err
	}
	ro := restore.FromBackupOptions{Cluster: d.c, SpecFile: d.specFile, Source: src, From: "latest", Flag: "drill restore",
		IdentityFile: d.identityFile, TempDir: d.tempDir, HostFetch: !d.noHostFetch, Force: true, Printer: d.p, Prompt: d.prompt}
	if d.onto != nil {
		ro.Into = func(ctx context.Context, seed restore.Options) (int64, error) {
			revision, err := bootstrapSeeded(ctx, d.onto, d.p, d.prompt, &seed, false)
			if err != nil {
				return 0, fmt.Errorf("building %s from the snapshot: %w", d.ontoFile, err)
			}
			return revision, nil
		}
	}
	res, err := restore.FromBackup(ctx, ro)
	if err != nil {
		return nil, err
	}
	return &drill.RestoreRun{Fetch: res.Fetch, Restore: res.Restore, Revision: res.Revision, Deltas: res.Deltas,
		Snapshot: drill.RestoredSnapshot(res.Snapshot, res.Last)}, nil
}
