package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

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

// preflight connects to every member (one SSH connection each, kept for the whole run) and gathers
// facts with a single read-only command, then checks them.
func (b *Bootstrapper) preflight(ctx context.Context) error {
	d, err := provision.FromSpec(b.spec, provision.SpecOptions{AcceptNewHostKeys: b.opt.AcceptNewHostKeys, Prompt: b.opt.Prompt})
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	b.mu.Lock()
	b.dialer = d
	b.mu.Unlock()
	// A download install has no local binary to read the architecture from: the host's architecture
	// is reported and the tarball URL must name it (checked when it does, see provision.URLArch).
	wantArch := ""
	if !b.downloadInstall() {
		if wantArch, err = provision.BinaryArch(b.spec.Spec.Etcd.Binaries.Etcd); err != nil {
			return err
		}
	}
	paths := b.remotePaths()
	return b.forEach(ctx, func(ctx context.Context, m member) error {
		c, err := d.Dial(ctx, provision.TargetOf(m.host))
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.clients[m.Name] = c
		b.mu.Unlock()
		sctx, cancel := b.stepCtx(ctx)
		defer cancel()
		sent := time.Now()
		res, err := b.run(sctx, m.Name, "preflight/facts", factsScript(b.spec.Spec.Etcd.DataDir, paths, readPaths))
		received := time.Now()
		if err != nil {
			return err
		}
		f, err := parseFacts(res.Stdout, sent, received)
		if err != nil {
			return fmt.Errorf("preflight/facts: %w", err)
		}
		b.mu.Lock()
		b.facts[m.Name] = f
		b.mu.Unlock()
		b.p.Hostf(m.Name, "%s %s, etcd %s, data dir %s, clock offset %s ±%s (rtt %s; %s), %s",
			f.OSPretty, f.Arch, orDash(f.EtcdActive), f.Data, f.ClockOffset.Round(time.Millisecond), f.ClockError.Round(time.Millisecond),
			f.RTT.Round(time.Millisecond), f.timeSyncSummary(), f.fsyncSummary())
		b.warnings(m, f)
		return b.check(m, f, wantArch)
	})
}

// warnings reports what is worth knowing but does not stop a bootstrap: no time synchronisation,
// a slow disk for etcd's WAL.
func (b *Bootstrapper) warnings(m member, f *Facts) {
	switch {
	case f.TimeSync == "":
		b.p.Warnf("%s: no time sync service is active (looked for %s): clocks drift; install and enable chrony or systemd-timesyncd",
			m.Name, strings.Join(TimeSyncServices, ", "))
	case f.NTPSynchronized == "no":
		b.p.Warnf("%s: %s is active but the clock is not synchronised yet (timedatectl: NTPSynchronized=no)", m.Name, f.TimeSync)
	}
	if f.Fsync.Samples > 0 && f.Fsync.P99 > MaxFsyncP99 {
		b.p.Warnf("%s: fsync p99 is %.1f ms on the filesystem of %s (%d writes of %d bytes with fdatasync): etcd needs its WAL fsync "+
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
func (b *Bootstrapper) check(m member, f *Facts, wantArch string) error {
	errs := &multierror.Error{ErrorFormat: joinErrors}
	fail := func(check, format string, args ...any) {
		e := &PreflightError{Host: m.Name, Check: check, Msg: fmt.Sprintf(format, args...)}
		if b.ignored(check) {
			b.p.Warnf("%s: %s (ignored)", m.Name, e.Error())
			return
		}
		errs = multierror.Append(errs, e)
	}
	if f.UID != 0 {
		fail(CheckRoot, "commands of user %q run with uid %d: hactl installs system services and needs root (log in as root, or give the user sudo)", b.spec.Spec.SSH.User, f.UID)
	}
	if f.Kernel != "Linux" {
		fail(CheckOS, "kernel %q: hactl supports Linux hosts with systemd", f.Kernel)
	}
	if wantArch != "" && f.Arch != wantArch {
		fail(CheckArch, "host is %s but %s is built for %s: use binaries for the host's architecture", f.Arch, b.spec.Spec.Etcd.Binaries.Etcd, wantArch)
	}
	if d := b.spec.Spec.Etcd.Download; d != nil {
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
	ours := etcdUp && f.Marker != nil && f.Marker.Cluster == b.spec.Metadata.Name
	if !ours {
		e := b.spec.Spec.Etcd
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
		fail(CheckDataDir, "data dir %s is not empty and holds no etcd data; hactl never deletes data: move it aside or set spec.etcd.dataDir", b.spec.Spec.Etcd.DataDir)
	}
	if skew := f.ClockOffset.Abs(); skew > MaxClockSkew+f.ClockError {
		fail(CheckClockSkew, "clock is %s ±%s off the operator's machine (limit %s): synchronise clocks with NTP/chrony",
			f.ClockOffset.Round(time.Millisecond), f.ClockError.Round(time.Millisecond), MaxClockSkew)
	}
	if q := b.spec.Spec.Etcd.QuotaBackendBytes; f.Data != DataMember && f.DiskAvail < q {
		fail(CheckDisk, "%d MiB free under %s, less than spec.etcd.quotaBackendBytes (%d MiB) the database may grow to",
			f.DiskAvail>>20, b.spec.Spec.Etcd.DataDir, q>>20)
	}
	return errs.ErrorOrNil()
}

func (b *Bootstrapper) ignored(check string) bool {
	for _, c := range b.opt.IgnorePreflightErrors {
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
