package schedule

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/ui"
)

// RunOptions are what a scheduled `hactl backup now` run is given besides the snapshot's own
// options (the units Install writes pass them; they work from cron or by hand as well).
type RunOptions struct {
	// SlotEvery (> 0) names the object after the scheduled slot: the trigger time in UTC truncated to
	// this interval (instead of an explicit slot).
	SlotEvery time.Duration
	// TriggerUsec is the timer's trigger time ($TRIGGER_TIMER_REALTIME_USEC, see TriggerTime); ""
	// means now.
	TriggerUsec string
	// Textfile, when set, is where the run's result is written as a Prometheus textfile; the
	// certificates' expiry goes next to it (CertificatesTextfile), from CertificateDirs.
	Textfile string
	// CertificateDirs are the directories whose *.crt files the certificates' textfile lists (etcd's
	// and, on a control plane, Kubernetes' PKI).
	CertificateDirs []string
	// Policy, when not zero, is the retention applied after a stored snapshot.
	Policy backup.Policy
}

// Prunes reports whether a retention policy was given.
func (o RunOptions) Prunes() bool { return o.Policy != (backup.Policy{}) }

// Slot checks the options and returns the slot the run's object is named after: slot as given
// without SlotEvery, else the slot of the trigger time (or now). Errors are *exitcode.UsageError
// (exit 2): a slot given with SlotEvery, an interval the timers can't fire on, a negative retention
// count or a policy keeping nothing.
func (o RunOptions) Slot(slot string, now time.Time) (string, error) {
	if o.Prunes() {
		if err := o.Policy.Validate(); err != nil {
			return "", &exitcode.UsageError{Err: err}
		}
	}
	if o.SlotEvery == 0 {
		return slot, nil
	}
	if slot != "" {
		return "", &exitcode.UsageError{Err: errors.New("--slot and --slot-every: give one (--slot-every computes the slot)")}
	}
	if _, err := OnCalendar(o.SlotEvery, true); err != nil {
		return "", &exitcode.UsageError{Err: fmt.Errorf("--slot-every: %w", err)}
	}
	return SlotName(TriggerTime(o.TriggerUsec, o.SlotEvery, now), o.SlotEvery), nil
}

// RunRecord is one `backup now` run as its textfile records it.
type RunRecord struct {
	// Cluster is the spec's metadata.name ("" when the spec or the object store could not be
	// opened); Member the --member the run was given.
	Cluster, Member string
	// Start is when the run started.
	Start time.Time
	// Snapshot is the snapshot the run stored (nil: none, skipped or failed).
	Snapshot *backup.Metadata
}

// Record writes the run's textfile (when o.Textfile is set; else it returns runErr as it is): the
// result is failure when runErr is set, success with a stored snapshot, else skipped (not the
// leader); a stored snapshot is the last success even when the run failed afterwards (pruning). It
// returns runErr, or the textfile's error when there was none; with both, the textfile's error
// goes to p as a warning (p nil: dropped).
func (o RunOptions) Record(r RunRecord, runErr error, p *ui.Printer) error {
	if o.Textfile == "" {
		return runErr
	}
	m := Metrics{Cluster: r.Cluster, Member: r.Member, Result: ResultFailure, RunTime: time.Now(), RunDuration: time.Since(r.Start)}
	if sn := r.Snapshot; sn != nil {
		m.LastSuccess = &Success{Time: m.RunTime, Duration: m.RunDuration, SizeBytes: sn.StoredSizeBytes, Revision: sn.Revision}
		if sn.Slot != "" {
			m.LastSuccess.Slot, _ = time.Parse(backup.TimeFormat, sn.Slot)
		}
	}
	switch {
	case runErr != nil:
	case r.Snapshot != nil:
		m.Result = ResultSuccess
	default:
		m.Result = ResultSkipped
	}
	// The certificates' expiry is a side report: a failure to write it is a warning, never the run's.
	if len(o.CertificateDirs) > 0 && r.Member != "" {
		cf := filepath.Join(filepath.Dir(o.Textfile), CertificatesTextfile)
		if cerr := WriteCertificatesTextfile(cf, r.Cluster, r.Member, o.CertificateDirs); cerr != nil && p != nil {
			p.Warnf("certificates textfile: %v", cerr)
		}
	}
	if werr := WriteTextfile(o.Textfile, m); werr != nil {
		if runErr == nil {
			return fmt.Errorf("backup now: %w", werr)
		}
		if p != nil {
			p.Warnf("%v", werr)
		}
	}
	return runErr
}
