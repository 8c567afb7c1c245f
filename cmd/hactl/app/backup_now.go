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
	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/backup/take"
	"github.com/hactl/hactl/ui"
)

type backupNowOptions struct {
	member       string
	onlyIfLeader bool
	slot         string
	output       string
	timeout      time.Duration
	// scheduled are the flags of scheduled runs (backup_schedule_run.go).
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
