package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/schedule"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/ui"
)

type backupScheduleOptions struct {
	every       time.Duration
	policy      backup.Policy
	allowShort  bool
	binary      string
	textfileDir string
	yes, dryRun bool
	status      bool
	disable     bool
	output      string
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

Every member's timer fires on the same slots; only the member that is the etcd leader at that moment
takes the snapshot, and the object is named after the slot, so each slot holds one snapshot even
when two members both believe they lead (they write the same key) and across leader changes and
host loss (a slot in which the leader dies may be missed). The runs need only etcd and the object
store (not the Kubernetes API). Each run writes a Prometheus textfile (--textfile-dir/` + schedule.TextfileName + `):
last run time and status, last success time, duration, stored size and revision.

--every must fall on wall-clock slots: whole minutes dividing an hour (1m 2m 3m 4m 5m 6m 10m 12m 15m
20m 30m), whole hours dividing a day, or 24h; under 1m only with --allow-short-interval (whole seconds
dividing a minute; for tests). Re-running changes only what differs (files compared by sha256;
units reloaded only when they change).

  hactl backup schedule -f cluster.yaml --every 5m --keep-last 288 --keep-daily 14 --yes
  hactl backup schedule -f cluster.yaml --status [-o json]   timers per member, last runs, age of the
                                                             newest snapshot: exit 3 when it is older
                                                             than 2 × the interval (or a timer is not active)
  hactl backup schedule -f cluster.yaml --disable            stop and remove it all from every member
                                                             (units, ` + schedule.ConfigDir + `, the binary,
                                                             the textfile); the snapshots stay

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
	f.DurationVar(&o.every, "every", 0, "interval between snapshots, on UTC wall-clock slots (e.g. 5m: at :00, :05, ...)")
	f.IntVar(&o.policy.KeepLast, "keep-last", 0, "after each snapshot, prune keeping the newest N")
	f.IntVar(&o.policy.KeepHourly, "keep-hourly", 0, "after each snapshot, prune keeping the newest of each of the last H hours (UTC)")
	f.IntVar(&o.policy.KeepDaily, "keep-daily", 0, "after each snapshot, prune keeping the newest of each of the last D days (UTC)")
	f.BoolVar(&o.allowShort, "allow-short-interval", false, "allow --every under 1m (whole seconds dividing a minute; for tests)")
	f.StringVar(&o.binary, "hactl-binary", "", "the Linux hactl binary to install (default: this one)")
	f.StringVar(&o.textfileDir, "textfile-dir", schedule.DefaultTextfileDir, "node_exporter textfile collector directory on the members")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	f.BoolVar(&o.dryRun, "dry-run", false, "show what would change on each member, change nothing")
	f.BoolVar(&o.status, "status", false, "show the schedule on every member and the age of the newest snapshot")
	f.BoolVar(&o.disable, "disable", false, "stop and remove the schedule from every member")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// scheduleInputs checks everything an install needs locally (exit 2 before any host is contacted)
// and returns the spec and each member's files.
func scheduleInputs(s Streams, g *globalOptions, o *backupScheduleOptions, everySet bool, p *ui.Printer) (*v1alpha1.Cluster, map[string][]schedule.File, string, error) {
	if !everySet {
		return nil, nil, "", &UsageError{Err: errors.New("--every is required, e.g. --every 5m (or --status, --disable)")}
	}
	onCal, err := schedule.OnCalendar(o.every, o.allowShort)
	if err != nil {
		return nil, nil, "", &UsageError{Err: err}
	}
	if err := o.policy.Validate(); err != nil {
		return nil, nil, "", &UsageError{Err: fmt.Errorf("%w (each run prunes after its snapshot)", err)}
	}
	if !path.IsAbs(o.textfileDir) {
		return nil, nil, "", &UsageError{Err: fmt.Errorf("--textfile-dir %q: must be an absolute path on the members", o.textfileDir)}
	}
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return nil, nil, "", err
	}
	if c.Spec.Backup == nil {
		return nil, nil, "", &UsageError{Err: fmt.Errorf("%s: spec.backup is not set: add spec.backup.objectStore (endpoint, bucket, credentials) to schedule backups (`hactl init` shows an example)", g.file)}
	}
	if err := c.ValidationError(g.file, append(specload.ValidateBackupFiles(c), specload.ValidateBackupEnvironment(c, os.Getenv)...)); err != nil {
		return nil, nil, "", err
	}
	if err := checkSSHEnvironment(c, g.file); err != nil {
		return nil, nil, "", err
	}
	creds, err := specload.ReadBackupCredentials(c, os.Getenv)
	if err != nil {
		return nil, nil, "", &UsageError{Err: err}
	}
	if creds.SessionToken != "" {
		p.Warnf("spec.backup.objectStore.credentials include a session token: temporary credentials expire, and the scheduled runs will fail when they do")
	}
	recipients, err := specload.BackupRecipients(c)
	if err != nil {
		return nil, nil, "", &UsageError{Err: err}
	}
	bin := o.binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, nil, "", &UsageError{Err: fmt.Errorf("finding this hactl binary: %w; pass --hactl-binary", err)}
		}
	}
	arch, err := provision.BinaryArch(bin)
	if err != nil {
		return nil, nil, "", &UsageError{Err: fmt.Errorf("--hactl-binary %s: not a Linux (ELF) binary: %w; build one with GOOS=linux GOARCH=<the hosts' architecture> go build ./cmd/hactl and pass it with --hactl-binary", bin, err)}
	}
	binFile, err := schedule.BinaryFile(bin)
	if err != nil {
		return nil, nil, "", &UsageError{Err: fmt.Errorf("--hactl-binary: %w", err)}
	}
	files := map[string][]schedule.File{}
	for _, h := range c.EtcdHosts() {
		cfg := schedule.Config{Cluster: c.Metadata.Name, Member: h.Name, Every: o.every.String(), OnCalendar: onCal,
			Policy: o.policy, Textfile: schedule.TextfilePath(o.textfileDir)}
		fs, err := schedule.Files(c, schedule.Inputs{Config: cfg, Binary: binFile, Credentials: creds, Recipients: recipients})
		if err != nil {
			return nil, nil, "", &UsageError{Err: err}
		}
		files[h.Name] = fs
	}
	return c, files, arch, nil
}

func runScheduleInstall(ctx context.Context, s Streams, g *globalOptions, o *backupScheduleOptions, everySet bool) error {
	p := ui.New(s.Err, g.verbose, false)
	c, files, arch, err := scheduleInputs(s, g, o, everySet, p)
	if err != nil {
		return err
	}
	var confirm func(string) (bool, error)
	if !o.dryRun {
		if confirm, err = confirmer(s, o.yes, ", or --dry-run to only see the plan"); err != nil {
			return err
		}
	}
	_, closeLog := openLog(g, p, os.Args[1:])
	defer closeLog()
	var names []string
	for _, h := range c.EtcdHosts() {
		names = append(names, h.Name)
	}
	if confirm != nil {
		ok, err := confirm(fmt.Sprintf("schedule a snapshot every %s on %s (the object store's credentials are copied to each, root only), pruning to %s after each?",
			o.every, strings.Join(names, ", "), policyString(o.policy)))
		if err != nil {
			return err
		}
		if !ok {
			p.Infof("nothing changed")
			return nil
		}
	}
	if _, err := openStore(ctx, c, g.file, ""); err != nil {
		p.Warnf("the bucket is not reachable from this machine (the members may still reach it): %v", err)
	}
	changes, err := perMember(ctx, s, c, p, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) (schedule.Change, string, error) {
		ch, err := schedule.Install(ctx, cl, h.Name, files[h.Name], arch, o.textfileDir, o.dryRun)
		return ch, describeChange(ch, o.dryRun), err
	})
	if err := reportPerMember(s, o.output, changes, err, "backup schedule"); err != nil {
		return err
	}
	if !o.dryRun {
		p.Infof("scheduled: a snapshot every %s from whichever member leads; see `hactl backup schedule -f %s --status`", o.every, g.file)
	}
	return nil
}

func policyString(p backup.Policy) string {
	var parts []string
	for _, x := range []struct {
		n    int
		what string
	}{{p.KeepLast, "the last %d"}, {p.KeepHourly, "%d hourly"}, {p.KeepDaily, "%d daily"}} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf(x.what, x.n))
		}
	}
	return strings.Join(parts, " + ")
}

func describeChange(ch schedule.Change, dryRun bool) string {
	if ch.Empty() {
		return "unchanged"
	}
	var parts []string
	verb := map[bool]string{false: "wrote", true: "would write"}[dryRun]
	if len(ch.Write) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s", verb, strings.Join(ch.Write, ", ")))
	}
	if len(ch.Removed) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s", map[bool]string{false: "removed", true: "would remove"}[dryRun], strings.Join(ch.Removed, ", ")))
	}
	if ch.Reload {
		parts = append(parts, map[bool]string{false: "reloaded systemd", true: "would reload systemd"}[dryRun])
	}
	if ch.StartTimer {
		parts = append(parts, map[bool]string{false: "(re)started " + schedule.TimerName, true: "would (re)start " + schedule.TimerName}[dryRun])
	}
	return strings.Join(parts, "; ")
}

// forEachMember dials every etcd member (known_hosts verified, keys, sudo and bastion as in a
// bootstrap) and calls fn with its connection, spec.ssh.maxParallel at a time; each member's work is
// bounded by max(spec.ssh.commandTimeout, 5m) (the binary upload). Errors name the member.
func forEachMember(ctx context.Context, s Streams, c *v1alpha1.Cluster, fn func(context.Context, v1alpha1.Host, *provision.Client) error) error {
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: terminalPrompter(s.In, s.Err)})
	if err != nil {
		return err
	}
	defer d.Close()
	limit := max(c.Spec.SSH.CommandTimeout.Duration, 5*time.Minute)
	return provision.ForEach(ctx, c.EtcdHosts(), c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name },
		func(ctx context.Context, h v1alpha1.Host) error {
			ctx, cancel := context.WithTimeout(ctx, limit)
			defer cancel()
			cl, err := d.Dial(ctx, provision.Target{Name: h.Name, Address: h.Address, Port: h.Port})
			if err != nil {
				return err
			}
			defer cl.Close()
			return fn(ctx, h, cl)
		})
}

// loadMemberSpec loads the spec and checks the SSH environment it names (exit 2 before any host is
// contacted).
func loadMemberSpec(s Streams, g *globalOptions) (*v1alpha1.Cluster, *ui.Printer, error) {
	p := ui.New(s.Err, g.verbose, false)
	c, err := loadSpec(g.file, p, false)
	if err != nil {
		return nil, nil, err
	}
	if err := checkSSHEnvironment(c, g.file); err != nil {
		return nil, nil, err
	}
	return c, p, nil
}

func runScheduleDisable(ctx context.Context, s Streams, g *globalOptions, o *backupScheduleOptions) error {
	c, p, err := loadMemberSpec(s, g)
	if err != nil {
		return err
	}
	_, closeLog := openLog(g, p, os.Args[1:])
	defer closeLog()
	removed, err := perMember(ctx, s, c, p, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) ([]string, string, error) {
		r, err := schedule.Disable(ctx, cl)
		if len(r) == 0 {
			return r, "no schedule", err
		}
		return r, "timer stopped and disabled; removed " + strings.Join(r, ", "), err
	})
	return reportPerMember(s, o.output, removed, err, "backup schedule --disable")
}

// perMember runs fn on every member (forEachMember), prints the line fn returns for each member
// that succeeded, and collects the results by host name.
func perMember[T any](ctx context.Context, s Streams, c *v1alpha1.Cluster, p *ui.Printer, fn func(context.Context, v1alpha1.Host, *provision.Client) (T, string, error)) (map[string]T, error) {
	out := map[string]T{}
	var mu sync.Mutex
	err := forEachMember(ctx, s, c, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) error {
		r, line, err := fn(ctx, h, cl)
		if err != nil {
			return err
		}
		mu.Lock()
		out[h.Name] = r
		mu.Unlock()
		p.Hostf(h.Name, "%s", line)
		return nil
	})
	return out, err
}

// reportPerMember writes the per-member results with -o json and wraps a failure with what.
func reportPerMember[T any](s Streams, output string, results map[string]T, err error, what string) error {
	if output == "json" {
		if werr := writeReport(s.Out, output, results, nil); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ScheduleStatusReport is `hactl backup schedule --status -o json`.
type ScheduleStatusReport struct {
	Cluster string `json:"cluster"`
	// Every is the interval read back from the members' schedule.json ("" when none has one).
	Every string                `json:"every,omitempty"`
	Hosts []schedule.HostStatus `json:"hosts"`
	// Newest is the newest complete snapshot (nil when there is none).
	Newest *NewestSnapshot `json:"newest,omitempty"`
	// Problems make the verdict fail (exit 3).
	Problems []string `json:"problems,omitempty"`
	Healthy  bool     `json:"healthy"`
}

// NewestSnapshot is the newest complete snapshot and its age.
type NewestSnapshot struct {
	Key         string    `json:"key"`
	Member      string    `json:"member"`
	Slot        string    `json:"slot,omitempty"`
	CompletedAt time.Time `json:"completedAt"`
	AgeSeconds  float64   `json:"ageSeconds"`
}

func runScheduleStatus(ctx context.Context, s Streams, g *globalOptions, o *backupScheduleOptions) error {
	c, _, err := loadMemberSpec(s, g)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, c, g.file, "")
	if err != nil {
		return err
	}
	rep := &ScheduleStatusReport{Cluster: c.Metadata.Name}
	hosts := c.EtcdHosts()
	statuses := make([]schedule.HostStatus, len(hosts))
	index := map[string]int{}
	for i, h := range hosts {
		index[h.Name] = i
		statuses[i] = schedule.HostStatus{Host: h.Name}
	}
	var l *backup.Listing
	var lerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, lerr = backup.List(ctx, st, c.Spec.Backup.ObjectStore.Prefix, c.Metadata.Name)
	}()
	ferr := forEachMember(ctx, s, c, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) error {
		statuses[index[h.Name]] = schedule.Status(ctx, cl, h.Name)
		return nil
	})
	<-done
	if lerr != nil {
		return fmt.Errorf("backup schedule --status: %w", lerr)
	}
	if ferr != nil {
		var me interface{ WrappedErrors() []error }
		if !errors.As(ferr, &me) {
			return fmt.Errorf("backup schedule --status: %w", ferr) // not a member's: e.g. the SSH keys
		}
		for _, e := range me.WrappedErrors() {
			var he *provision.HostError
			if errors.As(e, &he) {
				statuses[index[he.Host]].Error = e.Error()
			}
		}
	}
	rep.Hosts = statuses
	now := time.Now()
	evaluateSchedule(rep, l, now)
	if err := writeReport(s.Out, o.output, rep, func(w io.Writer) { printScheduleStatus(w, rep, now) }); err != nil {
		return err
	}
	if !rep.Healthy {
		return &VerdictError{Err: fmt.Errorf("backup schedule of cluster %s: %s", c.Metadata.Name, strings.Join(rep.Problems, "; "))}
	}
	return nil
}

// evaluateSchedule fills the interval, the newest snapshot and the problems: a member unreachable,
// without the schedule or whose timer is not active; no snapshot, or the newest older than twice
// the interval.
func evaluateSchedule(rep *ScheduleStatusReport, l *backup.Listing, now time.Time) {
	var every time.Duration
	for _, h := range rep.Hosts {
		switch {
		case h.Error != "":
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s", h.Host, h.Error))
		case !h.Installed:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: no schedule installed", h.Host))
		case h.TimerActive != "active":
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s is %s", h.Host, schedule.TimerName, dash(h.TimerActive)))
		}
		if h.Config != nil && every == 0 {
			if d, err := h.Config.Interval(); err == nil {
				every, rep.Every = d, h.Config.Every
			}
		}
	}
	if sn := l.Latest(); sn != nil {
		done := sn.Metadata.CompletedAt
		if done.IsZero() {
			done = sn.Time
		}
		rep.Newest = &NewestSnapshot{Key: sn.Data.Key, Member: sn.Metadata.MemberName, Slot: sn.Slot, CompletedAt: done, AgeSeconds: now.Sub(done).Seconds()}
	}
	switch {
	case every == 0:
		rep.Problems = append(rep.Problems, "no member has a backup schedule (install one with --every)")
	case rep.Newest == nil:
		rep.Problems = append(rep.Problems, fmt.Sprintf("no complete snapshot under %s", l.Prefix))
	case now.Sub(rep.Newest.CompletedAt) > 2*every:
		rep.Problems = append(rep.Problems, fmt.Sprintf("the newest snapshot %s is %s old, more than 2 × the interval %s", rep.Newest.Key, now.Sub(rep.Newest.CompletedAt).Round(time.Second), every))
	}
	rep.Healthy = len(rep.Problems) == 0
}

func printScheduleStatus(w io.Writer, rep *ScheduleStatusReport, now time.Time) {
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := t.Sub(now).Round(time.Second)
		if d >= 0 {
			return fmt.Sprintf("%s (in %s)", t.UTC().Format(time.TimeOnly), d)
		}
		return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.TimeOnly), -d)
	}
	var rows [][]string
	for _, h := range rep.Hosts {
		if h.Error != "" {
			rows = append(rows, []string{h.Host, "unreachable", "-", "-", "-", "-"})
			continue
		}
		timer := dash(h.TimerActive) + "/" + dash(h.TimerEnabled)
		last, success := "-", "-"
		if m := h.LastRun; m != nil {
			last = fmt.Sprintf("%s %s", dash(m.Result), when(m.RunTime))
			if sc := m.LastSuccess; sc != nil {
				success = fmt.Sprintf("%s rev %d, %d bytes", when(sc.Time), sc.Revision, sc.SizeBytes)
			}
		}
		rows = append(rows, []string{h.Host, timer, when(h.NextElapse), when(h.LastTrigger), last, success})
	}
	fmt.Fprintf(w, "cluster %s, every %s\n", rep.Cluster, dash(rep.Every))
	ui.Table(w, []string{"HOST", "TIMER", "NEXT", "LAST TRIGGER", "LAST RUN", "LAST SUCCESS"}, rows)
	if n := rep.Newest; n != nil {
		fmt.Fprintf(w, "newest snapshot: %s (member %s, %s old)\n", n.Key, dash(n.Member), time.Duration(n.AgeSeconds*float64(time.Second)).Round(time.Second))
	}
	for _, pr := range rep.Problems {
		fmt.Fprintf(w, "problem: %s\n", pr)
	}
}
