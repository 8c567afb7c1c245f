package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/ui"
)

type backupScheduleOptions struct {
	install schedule.InstallOptions
	yes     bool
	status  bool
	disable bool
	output  string
}

func newBackupScheduleCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupScheduleOptions{}
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Install (or show, or remove) scheduled backups: a systemd timer on every etcd member",
		Long: `Installs on EVERY etcd member, over SSH:

  ` + schedule.BinaryPath + `                    this hactl binary (--hactl-binary for another build; its
                                          architecture must be the host's uname -m)
  ` + schedule.ConfigDir + `/ (0700)          cluster.yaml (the cluster's name, members and spec.backup only),
                                          credentials (the object store's key, 0600: never on a command line),
                                          pki/ (the etcd CA, hactl's client certificate, key 0600), schedule.json
  ` + schedule.ServicePath + `   oneshot: hactl backup now --only-if-leader --member <host>
                                          --slot-every <interval>, then prune with the retention policy
  ` + schedule.TimerPath + `     OnCalendar on UTC wall-clock slots, AccuracySec=1s, Persistent=false
  ` + schedule.AgentServicePath + `  with --deltas: hactl backup agent --member <host>
                                          (Restart=always): delta snapshots every spec.backup.deltaEvery

Every member's timer fires on the same slots; only the member that is the etcd leader at that moment
takes the snapshot, and the object is named after the slot, so each slot holds one snapshot even
when two members both believe they lead (they write the same key) and across leader changes and
host loss (a slot in which the leader dies may be missed). The runs need only etcd and the object
store (not the Kubernetes API). Each run writes a Prometheus textfile (--textfile-dir/` + schedule.TextfileName + `):
last run time and status, last success time, duration, stored size and revision.

With --deltas every member also runs 'hactl backup agent': the agents elect one writer through etcd,
which stores the changes since the last full snapshot or delta every spec.backup.deltaEvery (default
30s; it must be shorter than --every), so a restore ('hactl restore --from latest') reaches a revision
about that old. A schedule re-run without --deltas stops and removes the agents.

--every must fall on wall-clock slots: whole minutes dividing an hour (1m 2m 3m 4m 5m 6m 10m 12m 15m
20m 30m), whole hours dividing a day, or 24h; under 1m only with --allow-short-interval (whole seconds
dividing a minute; for tests). Re-running changes only what differs (files compared by sha256;
units reloaded only when they change).

  hactl backup schedule -f cluster.yaml --every 5m --keep-last 288 --keep-daily 14 --yes
  hactl backup schedule -f cluster.yaml --every 15m --deltas --keep-last 96 --yes
  hactl backup schedule -f cluster.yaml --status [-o json]   timers per member, last runs, age of the
                                                             newest snapshot and delta: exit 3 when the
                                                             snapshot is older than 2 × the interval (or a
                                                             timer or agent is not active, or a delta is missing)
  hactl backup schedule -f cluster.yaml --disable            stop and remove it all from every member
                                                             (units, ` + schedule.ConfigDir + `, the binary,
                                                             both textfiles; a run in progress finishes
                                                             first); the snapshots stay

Exit 0 ok, 1 a member failed (named), 2 invalid input (found before any host is contacted), 3 --status verdict.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			switch {
			case o.status && o.disable:
				return &UsageError{Err: errors.New("--status and --disable: give one")}
			case o.status:
				return runScheduleStatus(cmd.Context(), s, g, o)
			case o.disable:
				return runScheduleDisable(cmd.Context(), s, g, o)
			}
			return runScheduleInstall(cmd.Context(), s, g, o, cmd.Flags().Changed("every"))
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.install.Every, "every", 0, "interval between snapshots, on UTC wall-clock slots (e.g. 5m: at :00, :05, ...)")
	f.IntVar(&o.install.Policy.KeepLast, "keep-last", 0, "after each snapshot, prune keeping the newest N")
	f.IntVar(&o.install.Policy.KeepHourly, "keep-hourly", 0, "after each snapshot, prune keeping the newest of each of the last H hours (UTC)")
	f.IntVar(&o.install.Policy.KeepDaily, "keep-daily", 0, "after each snapshot, prune keeping the newest of each of the last D days (UTC)")
	f.BoolVar(&o.install.Deltas, "deltas", false, "also run the delta agent on every member (delta snapshots every spec.backup.deltaEvery)")
	f.BoolVar(&o.install.AllowShort, "allow-short-interval", false, "allow --every under 1m (whole seconds dividing a minute; for tests)")
	f.StringVar(&o.install.Binary, "hactl-binary", "", "the Linux hactl binary to install (default: this one)")
	f.StringVar(&o.install.TextfileDir, "textfile-dir", schedule.DefaultTextfileDir, "node_exporter textfile collector directory on the members")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	f.BoolVar(&o.install.DryRun, "dry-run", false, "show what would change on each member, change nothing")
	f.BoolVar(&o.status, "status", false, "show the schedule on every member and the age of the newest snapshot")
	f.BoolVar(&o.disable, "disable", false, "stop and remove the schedule from every member")
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}

// scheduleMembers are the spec's etcd members for the schedule's operations.
func scheduleMembers(s Streams, g *globalOptions, c *v1alpha1.Cluster, p *ui.Printer) schedule.Members {
	return schedule.Members{Cluster: c, Source: g.file, Getenv: os.Getenv, Prompt: terminalPrompter(s.In, s.Err), Printer: p}
}

func runScheduleInstall(ctx context.Context, s Streams, g *globalOptions, o *backupScheduleOptions, everySet bool) error {
	if !everySet {
		return &UsageError{Err: errors.New("--every is required, e.g. --every 5m (or --status, --disable)")}
	}
	if _, err := o.install.Validate(); err != nil {
		return err
	}
	p := ui.New(s.Err, g.verbose, false)
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return err
	}
	in, err := scheduleMembers(s, g, c, p).Prepare(o.install)
	if err != nil {
		return err
	}
	var confirm func(string) (bool, error)
	if !o.install.DryRun {
		if confirm, err = confirmer(s, o.yes, ", or --dry-run to only see the plan"); err != nil {
			return err
		}
	}
	_, closeLog := openLog(g, p, os.Args[1:])
	defer closeLog()
	changes, err := in.Run(ctx, confirm)
	if changes == nil && err == nil { // not confirmed
		return nil
	}
	if err := writeResults(s, o.output, changes, err); err != nil {
		return err
	}
	if !o.install.DryRun {
		p.Infof("scheduled: a snapshot every %s from whichever member leads; see `hactl backup schedule -f %s --status`", o.install.Every, g.file)
	}
	return nil
}

func runScheduleDisable(ctx context.Context, s Streams, g *globalOptions, o *backupScheduleOptions) error {
	p := ui.New(s.Err, g.verbose, false)
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return err
	}
	_, closeLog := openLog(g, p, os.Args[1:])
	defer closeLog()
	removed, err := scheduleMembers(s, g, c, p).Disable(ctx)
	return writeResults(s, o.output, removed, err)
}

// writeResults writes per-member results with -o json (also after a failure, for the members that
// succeeded; the table is the per-member lines already printed) and returns err, or the writing's
// error when err is nil.
func writeResults[T any](s Streams, output string, results map[string]T, err error) error {
	if machineOutput(output) && results != nil {
		if werr := writeReport(s.Out, output, results, nil); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

func runScheduleStatus(ctx context.Context, s Streams, g *globalOptions, o *backupScheduleOptions) error {
	p := ui.New(s.Err, g.verbose, false)
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return err
	}
	rep, err := scheduleMembers(s, g, c, p).Status(ctx)
	if err != nil {
		return err
	}
	if err := writeReport(s.Out, o.output, rep, rep.Print); err != nil {
		return err
	}
	if !rep.Healthy {
		return &VerdictError{Err: fmt.Errorf("backup schedule of cluster %s: %s", c.Metadata.Name, strings.Join(rep.Problems, "; "))}
	}
	return nil
}
