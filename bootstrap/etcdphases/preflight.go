package etcdphases

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// Preflight check names, for --ignore-preflight-errors.
const (
	CheckRoot      = "root"
	CheckOS        = "os"
	CheckArch      = "arch"
	CheckSystemd   = "systemd"
	CheckPorts     = "ports"
	CheckDataDir   = "data-dir"
	CheckClockSkew = "clock-skew"
	CheckDisk      = "disk"
)

// Checks lists every preflight check name.
var Checks = []string{CheckRoot, CheckOS, CheckArch, CheckSystemd, CheckPorts, CheckDataDir, CheckClockSkew, CheckDisk}

// MaxClockSkew is the largest clock offset accepted between a host and the operator's machine. etcd's
// peer prober warns when two members' clocks differ by more than 1 s (rafthttp, "clock difference
// against peer is too high"); leases and certificate validity also assume synchronised clocks.
const MaxClockSkew = time.Second

// PreflightError is one failed check on one host.
type PreflightError struct {
	Host  string
	Check string
	Msg   string
}

func (e *PreflightError) Error() string {
	return fmt.Sprintf("preflight check %q failed: %s (skip with --ignore-preflight-errors=%s if you know why)", e.Check, e.Msg, e.Check)
}

// Preflight connects to every host of the run (runctx.Run.Connect: one SSH connection each, kept
// for the whole run, and one read-only facts command gathering what every group asked for), then
// checks the members' facts.
type Preflight struct{ g *Group }

// Title is PhasePreflight.
func (*Preflight) Title() string { return PhasePreflight }

// Run does the phase's work. Errors are aggregated per host: connection and command errors, and
// *PreflightError for each failed check.
func (ph *Preflight) Run(ctx context.Context) error {
	g := ph.g
	spec := g.run.Spec
	// A download install has no local binary to read the architecture from: the host's architecture
	// is reported and the tarball URL must name it (checked when it does, see provision.URLArch).
	wantArch := ""
	if !g.files.downloadInstall() {
		var err error
		if wantArch, err = provision.BinaryArch(spec.Spec.Etcd.Binaries.Etcd); err != nil {
			return err
		}
	}
	return g.run.Connect(ctx, func(ctx context.Context, host string) error {
		i := slices.IndexFunc(g.members, func(m Member) bool { return m.Name == host })
		if i < 0 {
			return nil // another group's host
		}
		m := g.members[i]
		pf := g.run.Facts(m.Name)
		if pf == nil {
			return fmt.Errorf("%s: no facts gathered", runctx.FactsStep)
		}
		if !pf.Has("etcd.data") {
			return fmt.Errorf("%s: the host did not report its data dir's state (is /bin/sh a POSIX shell?)", runctx.FactsStep)
		}
		f := factsFrom(pf)
		g.ledger.setFacts(m.Name, f)
		g.run.Printer.Hostf(m.Name, "%s %s, etcd %s, data dir %s, clock offset %s ±%s (rtt %s; %s), %s",
			f.OSPretty, f.Arch, orDash(f.EtcdActive), f.Data, f.ClockOffset.Round(time.Millisecond), f.ClockError.Round(time.Millisecond),
			f.RTT.Round(time.Millisecond), f.timeSyncSummary(), f.fsyncSummary())
		ph.warnings(m, f)
		return ph.check(m, f, wantArch)
	})
}

// warnings reports what is worth knowing but does not stop a bootstrap: no time synchronisation,
// a slow disk for etcd's WAL.
func (ph *Preflight) warnings(m Member, f *Facts) {
	g := ph.g
	switch {
	case f.TimeSync == "":
		g.run.Printer.Warnf("%s: no time sync service is active (looked for %s): clocks drift; install and enable chrony or systemd-timesyncd",
			m.Name, strings.Join(TimeSyncServices, ", "))
	case f.NTPSynchronized == "no":
		g.run.Printer.Warnf("%s: %s is active but the clock is not synchronised yet (timedatectl: NTPSynchronized=no)", m.Name, f.TimeSync)
	}
	if f.Fsync.Samples > 0 && f.Fsync.P99 > MaxFsyncP99 {
		g.run.Printer.Warnf("%s: fsync p99 is %.1f ms on the filesystem of %s (%d writes of %d bytes with fdatasync): etcd needs its WAL fsync "+
			"p99 under %s or members miss heartbeats and elections follow under load; put the data dir on a faster disk (SSD)",
			m.Name, float64(f.Fsync.P99)/float64(time.Millisecond), f.Fsync.Dir, f.Fsync.Samples, fsyncBlockSize, MaxFsyncP99)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// check runs the host-local preflight checks on gathered facts. Checks needing the cluster record
// (is this data ours?) run in plan.
func (ph *Preflight) check(m Member, f *Facts, wantArch string) error {
	g := ph.g
	errs := &multierror.Error{ErrorFormat: joinErrors}
	fail := func(check, format string, args ...any) {
		e := &PreflightError{Host: m.Name, Check: check, Msg: fmt.Sprintf(format, args...)}
		if ph.ignored(check) {
			g.run.Printer.Warnf("%s: %s (ignored)", m.Name, e.Error())
			return
		}
		errs = multierror.Append(errs, e)
	}
	if f.UID != 0 {
		fail(CheckRoot, "commands of user %q run with uid %d: hactl installs system services and needs root (log in as root, or give the user sudo)", g.run.Spec.SSHUser(m.Name), f.UID)
	}
	if f.Kernel != "Linux" {
		fail(CheckOS, "kernel %q: hactl supports Linux hosts with systemd", f.Kernel)
	}
	if wantArch != "" && f.Arch != wantArch {
		fail(CheckArch, "host is %s but %s is built for %s: use binaries for the host's architecture", f.Arch, g.run.Spec.Spec.Etcd.Binaries.Etcd, wantArch)
	}
	if d := g.run.Spec.Spec.Etcd.Download; d != nil {
		if ua := provision.URLArch(d.URL); ua != "" && f.Arch != ua {
			fail(CheckArch, "host is %s but spec.etcd.download.url names a %s tarball (%s): use the tarball for the host's architecture",
				f.Arch, ua, d.URL)
		}
	}
	if !f.Systemd {
		fail(CheckSystemd, "systemd is not running as init (/run/systemd/system is missing): etcd is installed as a systemd service")
	}
	// Ports held by the etcd hactl installed here (marker present; running, starting or restarting
	// after an interrupted run) are expected; anything else holding them is a conflict.
	etcdUp := f.EtcdRunning || f.EtcdActive == "active" || f.EtcdActive == "activating"
	ours := etcdUp && f.Marker != nil && f.Marker.Cluster == g.run.Spec.Metadata.Name
	if !ours {
		e := g.run.Spec.Spec.Etcd
		var busy []string
		for _, port := range []int{e.ClientPort, e.PeerPort, etcd.MetricsPort} {
			if f.ListenPorts[port] {
				busy = append(busy, fmt.Sprint(port))
			}
		}
		if len(busy) > 0 {
			fail(CheckPorts, "TCP port(s) %s already in use by another process (etcd here is %s): free them or change spec.etcd.clientPort/peerPort",
				strings.Join(busy, ", "), orDash(f.EtcdActive))
		}
	}
	if f.Data == DataForeign {
		fail(CheckDataDir, "data dir %s is not empty and holds no etcd data; hactl never deletes data: move it aside or set spec.etcd.dataDir", g.run.Spec.Spec.Etcd.DataDir)
	}
	if skew := f.ClockOffset.Abs(); skew > MaxClockSkew+f.ClockError {
		fail(CheckClockSkew, "clock is %s ±%s off the operator's machine (limit %s): synchronise clocks with NTP/chrony",
			f.ClockOffset.Round(time.Millisecond), f.ClockError.Round(time.Millisecond), MaxClockSkew)
	}
	if q := g.run.Spec.Spec.Etcd.QuotaBackendBytes; f.Data != DataMember && f.DiskAvail < q {
		fail(CheckDisk, "%d MiB free under %s, less than spec.etcd.quotaBackendBytes (%d MiB) the database may grow to",
			f.DiskAvail>>20, g.run.Spec.Spec.Etcd.DataDir, q>>20)
	}
	return errs.ErrorOrNil()
}

func (ph *Preflight) ignored(check string) bool {
	g := ph.g
	for _, c := range g.opt.IgnorePreflightErrors {
		if c == check || c == "all" {
			return true
		}
	}
	return false
}

// joinErrors formats a host's several errors on one line each without nesting bullets.
func joinErrors(es []error) string {
	if len(es) == 1 {
		return es[0].Error()
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n\t  ")
}
