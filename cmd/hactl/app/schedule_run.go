package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/schedule"
)

// scheduledRunOptions are the flags `backup now` takes for scheduled runs (the units `backup
// schedule` installs pass them; they work from cron or by hand as well).
type scheduledRunOptions struct {
	slotEvery   time.Duration
	triggerUsec string
	textfile    string
	policy      backup.Policy
}

func (o *scheduledRunOptions) addFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.slotEvery, "slot-every", 0, "name the object after the scheduled slot: the (timer's trigger) time in UTC truncated to this interval, e.g. 5m (instead of --slot)")
	f.StringVar(&o.triggerUsec, "slot-trigger-usec", "", "the timer's trigger time in microseconds since the epoch ($TRIGGER_TIMER_REALTIME_USEC); default now")
	_ = f.MarkHidden("slot-trigger-usec")
	f.StringVar(&o.textfile, "textfile", "", "after the run, write its result as a Prometheus textfile here (node_exporter textfile collector format, atomic)")
	f.IntVar(&o.policy.KeepLast, "keep-last", 0, "after a stored snapshot, prune keeping the newest N (as `backup prune --yes`)")
	f.IntVar(&o.policy.KeepHourly, "keep-hourly", 0, "after a stored snapshot, prune keeping the newest of each of the last H hours")
	f.IntVar(&o.policy.KeepDaily, "keep-daily", 0, "after a stored snapshot, prune keeping the newest of each of the last D days")
}

// prunes reports whether a retention policy was given.
func (o *scheduledRunOptions) prunes() bool { return o.policy != (backup.Policy{}) }

// resolveSlot checks the flags and, with --slot-every, sets *slot to the slot of the trigger time
// (or now): usage errors for --slot with --slot-every, an interval the timers can't fire on, or a
// negative retention count.
func (o *scheduledRunOptions) resolveSlot(slot *string, now time.Time) error {
	if o.prunes() {
		if err := o.policy.Validate(); err != nil {
			return &UsageError{Err: err}
		}
	}
	if o.slotEvery == 0 {
		return nil
	}
	if *slot != "" {
		return &UsageError{Err: errors.New("--slot and --slot-every: give one (--slot-every computes the slot)")}
	}
	if _, err := schedule.OnCalendar(o.slotEvery, true); err != nil {
		return &UsageError{Err: fmt.Errorf("--slot-every: %w", err)}
	}
	*slot = schedule.SlotName(schedule.TriggerTime(o.triggerUsec, o.slotEvery, now), o.slotEvery)
	return nil
}

// finish ends a `backup now` run: after a stored snapshot, prune with the policy (if any); then
// write the textfile (if asked) whatever happened; then print the report. A failed prune fails the
// run (exit 1) but the snapshot counts as the last success.
func (o *scheduledRunOptions) finish(ctx context.Context, env *backupEnv, member string, start time.Time, rep *BackupNowReport, err error, print func() error) error {
	if err == nil && rep.Snapshot != nil && o.prunes() {
		if perr := o.prune(ctx, env); perr != nil {
			err = fmt.Errorf("backup now: the snapshot %s is stored, but pruning failed: %w", rep.Snapshot.Key, perr)
		}
	}
	if o.textfile != "" {
		m := schedule.Metrics{Member: member, Result: schedule.ResultFailure, RunTime: time.Now(), RunDuration: time.Since(start)}
		if env != nil {
			m.Cluster = env.c.Metadata.Name
		}
		if rep != nil && rep.Snapshot != nil {
			sn := rep.Snapshot
			m.LastSuccess = &schedule.Success{Time: m.RunTime, Duration: m.RunDuration, SizeBytes: sn.StoredSizeBytes, Revision: sn.Revision}
			if sn.Slot != "" {
				m.LastSuccess.Slot, _ = time.Parse(backup.TimeFormat, sn.Slot)
			}
		}
		switch {
		case err != nil:
		case rep.Snapshot != nil:
			m.Result = schedule.ResultSuccess
		default:
			m.Result = schedule.ResultSkipped
		}
		if werr := schedule.WriteTextfile(o.textfile, m); werr != nil {
			if err == nil {
				err = fmt.Errorf("backup now: %w", werr)
			} else if env != nil {
				env.p.Warnf("%v", werr)
			}
		}
	}
	if rep != nil {
		if perr := print(); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// prune applies the policy (no confirmation: the policy was given explicitly) with backup prune's
// one-hour grace period for incomplete uploads.
func (o *scheduledRunOptions) prune(ctx context.Context, env *backupEnv) error {
	l, err := backup.List(ctx, env.store, env.c.Spec.Backup.ObjectStore.Prefix, env.c.Metadata.Name)
	if err != nil {
		return err
	}
	plan := backup.Plan(l, o.policy, time.Now(), time.Hour)
	if n := len(plan.Deletions()) + len(plan.Orphans) + len(plan.Incomplete); n == 0 {
		return nil
	}
	return backup.Apply(ctx, env.store, plan, func(format string, args ...any) { env.p.Infof(format, args...) })
}
