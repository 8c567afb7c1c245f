package schedule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/ui"
)

// Members are a cluster's etcd members, reached over SSH (known_hosts verified; keys, sudo and the
// bastion as in a bootstrap), for the cluster-wide operations of `hactl backup schedule`: Prepare
// and Installation.Run, Disable, Status.
type Members struct {
	// Cluster is the loaded, defaulted and validated spec; Source names its file in errors.
	Cluster *v1alpha1.Cluster
	Source  string
	// Getenv reads the environment variables the spec names (nil: os.Getenv).
	Getenv func(string) string
	// Prompt asks for a key passphrase or the sudo password; nil asks nothing.
	Prompt provision.Prompter
	// Printer gets a line per member and the progress; required.
	Printer *ui.Printer
}

func (m Members) getenv() func(string) string {
	if m.Getenv == nil {
		return os.Getenv
	}
	return m.Getenv
}

// checkEnvironment refuses, before any host is contacted (exit 2), environment variables the spec
// names for secrets that are unset and an agent-only login without SSH_AUTH_SOCK.
func (m Members) checkEnvironment() error {
	return m.Cluster.ValidationError(m.Source, specload.ValidateEnvironment(m.Cluster, m.getenv()))
}

// forEach dials every etcd member and calls fn with its connection, spec.ssh.maxParallel at a
// time; each member's work is bounded by max(spec.ssh.commandTimeout, 5m) (the binary upload).
// Errors are provision.FromSpec's, or provision.ForEach's aggregate of *provision.HostError.
func (m Members) forEach(ctx context.Context, fn func(context.Context, v1alpha1.Host, *provision.Client) error) error {
	c := m.Cluster
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: m.Prompt})
	if err != nil {
		return err
	}
	defer d.Close()
	limit := max(c.Spec.SSH.CommandTimeout.Duration, 5*time.Minute)
	return provision.ForEach(ctx, c.EtcdHosts(), c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name },
		func(ctx context.Context, h v1alpha1.Host) error {
			ctx, cancel := context.WithTimeout(ctx, limit)
			defer cancel()
			cl, err := d.Dial(ctx, provision.TargetOf(h))
			if err != nil {
				return err
			}
			defer cl.Close()
			return fn(ctx, h, cl)
		})
}

// perMember runs fn on every member (Members.forEach), prints the line fn returns for each member
// that succeeded, and returns the results by host name (those of the members that succeeded, also
// when others failed) and forEach's error.
func perMember[T any](ctx context.Context, m Members, fn func(context.Context, v1alpha1.Host, *provision.Client) (T, string, error)) (map[string]T, error) {
	out := map[string]T{}
	var mu sync.Mutex
	err := m.forEach(ctx, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) error {
		r, line, err := fn(ctx, h, cl)
		if err != nil {
			return err
		}
		mu.Lock()
		out[h.Name] = r
		mu.Unlock()
		m.Printer.Hostf(h.Name, "%s", line)
		return nil
	})
	return out, err
}

// InstallOptions are what `backup schedule` installs.
type InstallOptions struct {
	// Every is the interval, on UTC wall-clock slots (OnCalendar); under MinInterval only with
	// AllowShort.
	Every      time.Duration
	AllowShort bool
	// Policy is the retention applied after each snapshot; it must keep something.
	Policy backup.Policy
	// Binary is the local Linux hactl binary to upload ("": this executable).
	Binary string
	// TextfileDir is the absolute directory on the members for the run's Prometheus textfile.
	TextfileDir string
	// DryRun only probes the members and says what would change.
	DryRun bool
	// Deltas installs `hactl backup agent` on every member too (delta snapshots every
	// spec.backup.deltaEvery, which must be shorter than Every).
	Deltas bool
}

// Validate checks the options alone (no spec, no host) and returns the timers' calendar
// expression. Errors are *exitcode.UsageError (exit 2) naming the flag.
func (o InstallOptions) Validate() (onCalendar string, _ error) {
	onCal, err := OnCalendar(o.Every, o.AllowShort)
	if err != nil {
		return "", &exitcode.UsageError{Err: err}
	}
	if err := o.Policy.Validate(); err != nil {
		return "", &exitcode.UsageError{Err: fmt.Errorf("%w (each run prunes after its snapshot)", err)}
	}
	if !path.IsAbs(o.TextfileDir) {
		return "", &exitcode.UsageError{Err: fmt.Errorf("--textfile-dir %q: must be an absolute path on the members", o.TextfileDir)}
	}
	return onCal, nil
}

// Installation is an install checked locally and ready to run: every member's files.
type Installation struct {
	m     Members
	o     InstallOptions
	files map[string][]File // by member
	arch  string            // the binary's architecture (uname -m)
}

// Prepare checks everything an install needs locally, before any host is contacted, and renders
// every member's files: the options (Validate), spec.backup and the files and environment it names
// (backup.CheckSpec), the SSH environment, the credentials, the age recipients, and the binary
// (a Linux ELF, its architecture). A session token in the credentials is warned about (temporary
// credentials expire). Every error is exit 2: *exitcode.UsageError or *v1alpha1.ValidationError.
func (m Members) Prepare(o InstallOptions) (*Installation, error) {
	onCal, err := o.Validate()
	if err != nil {
		return nil, err
	}
	c := m.Cluster
	if err := backup.CheckSpec(c, m.Source, "schedule backups", m.getenv()); err != nil {
		return nil, err
	}
	if de := c.Spec.Backup.DeltaEvery.Duration; o.Deltas && de >= o.Every {
		return nil, &exitcode.UsageError{Err: fmt.Errorf("--deltas: spec.backup.deltaEvery %s is not shorter than --every %s: a delta holds the changes since the last one, so it must come more often than the full snapshots; lower deltaEvery or raise --every", de, o.Every)}
	}
	if err := m.checkEnvironment(); err != nil {
		return nil, err
	}
	creds, err := specload.ReadBackupCredentials(c, m.getenv())
	if err != nil {
		return nil, &exitcode.UsageError{Err: err}
	}
	if creds.SessionToken != "" {
		m.Printer.Warnf("spec.backup.objectStore.credentials include a session token: temporary credentials expire, and the scheduled runs will fail when they do")
	}
	recipients, err := specload.BackupRecipients(c)
	if err != nil {
		return nil, &exitcode.UsageError{Err: err}
	}
	bin := o.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, &exitcode.UsageError{Err: fmt.Errorf("finding this hactl binary: %w; pass --hactl-binary", err)}
		}
	}
	arch, err := provision.BinaryArch(bin)
	if err != nil {
		return nil, &exitcode.UsageError{Err: fmt.Errorf("--hactl-binary %s: not a Linux (ELF) binary: %w; build one with GOOS=linux GOARCH=<the hosts' architecture> go build ./cmd/hactl and pass it with --hactl-binary", bin, err)}
	}
	binFile, err := BinaryFile(bin)
	if err != nil {
		return nil, &exitcode.UsageError{Err: fmt.Errorf("--hactl-binary: %w", err)}
	}
	in := &Installation{m: m, o: o, files: map[string][]File{}, arch: arch}
	for _, h := range c.EtcdHosts() {
		cfg := Config{Cluster: c.Metadata.Name, Member: h.Name, Every: o.Every.String(), OnCalendar: onCal,
			Policy: o.Policy, Textfile: TextfilePath(o.TextfileDir)}
		if o.Deltas {
			cfg.Deltas, cfg.DeltaEvery = true, c.Spec.Backup.DeltaEvery.Duration.String()
		}
		fs, err := Files(c, Inputs{Config: cfg, Binary: binFile, Credentials: creds, Recipients: recipients})
		if err != nil {
			return nil, &exitcode.UsageError{Err: err}
		}
		in.files[h.Name] = fs
	}
	return in, nil
}

// Run asks confirm (nil: go ahead) whether to install on every member, warns when the bucket is
// not reachable from here (the members may still reach it), then converges every member (Install)
// and prints what changed on each. It returns the changes by member, nil (and no error) when the
// question was answered no; the error aggregates the members that failed (*provision.HostError),
// wrapped "backup schedule: ", the changes then holding the members that succeeded.
func (in *Installation) Run(ctx context.Context, confirm func(question string) (bool, error)) (map[string]Change, error) {
	m, o, c := in.m, in.o, in.m.Cluster
	var names []string
	for _, h := range c.EtcdHosts() {
		names = append(names, h.Name)
	}
	if confirm != nil {
		ok, err := confirm(fmt.Sprintf("schedule a snapshot every %s on %s (the object store's credentials are copied to each, root only), pruning to %s after each?",
			o.Every, strings.Join(names, ", "), policyString(o.Policy)))
		if err != nil {
			return nil, err
		}
		if !ok {
			m.Printer.Infof("nothing changed")
			return nil, nil
		}
	}
	if _, err := backup.OpenStore(ctx, c, backup.StoreOptions{Source: m.Source, Getenv: m.Getenv}); err != nil {
		m.Printer.Warnf("the bucket is not reachable from this machine (the members may still reach it): %v", err)
	}
	changes, err := perMember(ctx, m, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) (Change, string, error) {
		ch, err := Install(ctx, cl, h.Name, in.files[h.Name], in.arch, o.TextfileDir, o.DryRun)
		return ch, describeChange(ch, o.DryRun), err
	})
	if err != nil {
		return changes, fmt.Errorf("backup schedule: %w", err)
	}
	return changes, nil
}

// policyString is the policy as the confirmation says it: "the last 3 + 2 hourly + 1 daily".
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

// describeChange is a member's line after Install: what was (or, with dryRun, would be) written,
// removed, reloaded and started; "unchanged" when nothing.
func describeChange(ch Change, dryRun bool) string {
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
		parts = append(parts, map[bool]string{false: "(re)started " + TimerName, true: "would (re)start " + TimerName}[dryRun])
	}
	if ch.RestartAgent {
		parts = append(parts, map[bool]string{false: "(re)started " + AgentServiceName, true: "would (re)start " + AgentServiceName}[dryRun])
	}
	if ch.StopAgent {
		parts = append(parts, map[bool]string{false: "stopped " + AgentServiceName, true: "would stop " + AgentServiceName}[dryRun])
	}
	return strings.Join(parts, "; ")
}

// Disable stops and removes the schedule from every member (units, ConfigDir, the binary, both
// textfiles, after a run in progress; Disable per member); the snapshots stay. It returns the removed paths by member (those
// of the members that succeeded) and the members that failed (*provision.HostError, aggregated),
// wrapped "backup schedule --disable: ". An unset environment variable the spec names for SSH is
// an exit-2 error before any host is contacted.
func (m Members) Disable(ctx context.Context) (map[string][]string, error) {
	if err := m.checkEnvironment(); err != nil {
		return nil, err
	}
	removed, err := perMember(ctx, m, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) ([]string, string, error) {
		r, err := Disable(ctx, cl)
		if len(r) == 0 {
			return r, "no schedule", err
		}
		return r, "timer stopped and disabled; removed " + strings.Join(r, ", "), err
	})
	if err != nil {
		return removed, fmt.Errorf("backup schedule --disable: %w", err)
	}
	return removed, nil
}

// Status reads the schedule on every member (Status per member; one that can't be reached has its
// Error set) while it lists the object store, and judges them (see StatusReport.Problems). Errors:
// the SSH or backup environment (exit 2, before any host is contacted), the bucket check, the
// listing, or SSH failing for a reason that is no member's (keys); a member's failure is in the
// report, not in the error.
func (m Members) Status(ctx context.Context) (*StatusReport, error) {
	if err := m.checkEnvironment(); err != nil {
		return nil, err
	}
	c := m.Cluster
	st, err := backup.OpenStore(ctx, c, backup.StoreOptions{Source: m.Source, Getenv: m.Getenv})
	if err != nil {
		return nil, err
	}
	hosts := c.EtcdHosts()
	statuses := make([]HostStatus, len(hosts))
	index := map[string]int{}
	for i, h := range hosts {
		index[h.Name] = i
		statuses[i] = HostStatus{Host: h.Name}
	}
	var l *backup.Listing
	var lerr error
	done := make(chan struct{})
	var deltas []backup.Delta
	var derr error // listing the deltas: a problem in the report, not the command's failure
	go func() {
		defer close(done)
		if l, lerr = backup.ListCluster(ctx, st, c); lerr == nil {
			deltas, derr = backup.ListDeltas(ctx, st, c.Spec.Backup.ObjectStore.Prefix, c.Metadata.Name)
		}
	}()
	ferr := m.forEach(ctx, func(ctx context.Context, h v1alpha1.Host, cl *provision.Client) error {
		statuses[index[h.Name]] = Status(ctx, cl, h.Name)
		return nil
	})
	<-done
	if lerr != nil {
		return nil, fmt.Errorf("backup schedule --status: %w", lerr)
	}
	if ferr != nil {
		var me interface{ WrappedErrors() []error }
		if !errors.As(ferr, &me) {
			return nil, fmt.Errorf("backup schedule --status: %w", ferr) // not a member's: e.g. the SSH keys
		}
		for _, e := range me.WrappedErrors() {
			var he *provision.HostError
			if errors.As(e, &he) {
				statuses[index[he.Host]].Error = e.Error()
			}
		}
	}
	rep := &StatusReport{Cluster: c.Metadata.Name, Hosts: statuses}
	rep.evaluate(l, deltas, time.Now())
	if derr != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("listing the delta snapshots: %v", derr))
		rep.Healthy = false
	}
	return rep, nil
}
