package frontphases

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
)

// Exit codes of lbApplyScript (any other non-zero code is an unexpected failure of the script).
const (
	applyInvalid    = 3 // a staged configuration failed validation: nothing was swapped in
	applyRolledBack = 4 // reload/start failed; the previous configuration is back and running
	applyBroken     = 5 // reload/start failed and there was no previous configuration, or it failed too
)

// LBApplyError is a load balancer configuration that could not be applied on a host. Outcome says
// what state the host was left in; Output is what the tool (haproxy -c, keepalived --config-test,
// systemctl, the journal) printed.
type LBApplyError struct {
	Host    string
	Outcome string // "invalid" (nothing changed), "rolled back" (previous config running), "broken"
	Err     error  // the *provision.CommandError of the script
	Output  string
}

func (e *LBApplyError) Error() string {
	switch e.Outcome {
	case "invalid":
		return fmt.Sprintf("host %s: step lb/install: the new configuration was refused by its own tool on the host; nothing was changed:\n%s", e.Host, e.Output)
	case "rolled back":
		return fmt.Sprintf("host %s: step lb/install: reload failed; rolled back to the previous configuration (kept as *%s), which is running again:\n%s", e.Host, previousSuffix, e.Output)
	default:
		return fmt.Sprintf("host %s: step lb/install: reload/start failed and no working previous configuration could be restored:\n%s", e.Host, e.Output)
	}
}

func (e *LBApplyError) Unwrap() error { return e.Err }

// EtcdCerts installs the etcd CA and kube-apiserver's etcd client certificate at kubeadm's paths
// (kubeadm.EtcdCAFile, EtcdClientCertFile, EtcdClientKeyFile) on every control-plane host whose
// copies differ. Atomic uploads; nothing restarts (kube-apiserver reads them when it starts).
type EtcdCerts struct{ g *Group }

// Title is PhaseEtcdCerts.
func (*EtcdCerts) Title() string { return PhaseEtcdCerts }

// Mutates: the phase changes hosts.
func (*EtcdCerts) Mutates() bool { return true }

// ShouldRun: some control-plane host's credentials differ.
func (ph *EtcdCerts) ShouldRun() bool {
	for _, h := range ph.g.fronts {
		p := ph.g.plans[h.host.Name]
		if p == nil {
			continue
		}
		for _, df := range p.upload {
			if slices.Contains([]string{kubeadm.EtcdCAFile, kubeadm.EtcdClientCertFile, kubeadm.EtcdClientKeyFile}, df.Path) {
				return true
			}
		}
	}
	return false
}

// Run does the phase's work.
func (ph *EtcdCerts) Run(ctx context.Context) error {
	b := ph.g
	return b.forEach(ctx, func(ctx context.Context, h frontHost) error {
		var files []provision.File
		for _, df := range b.plans[h.host.Name].upload {
			if df.Note == "kube-apiserver's etcd credentials" {
				files = append(files, provision.File{Path: df.Path, Mode: df.Mode, Content: df.Data, SHA256: df.Sum})
			}
		}
		if len(files) == 0 {
			return nil
		}
		sctx, cancel := b.run.StepCtx(ctx)
		defer cancel()
		if err := b.run.Upload(sctx, h.host.Name, PhaseEtcdCerts, files); err != nil {
			return err
		}
		b.run.Printer.Hostf(h.host.Name, "installed kube-apiserver's etcd credentials (%s, %s, %s)", kubeadm.EtcdCAFile, kubeadm.EtcdClientCertFile, kubeadm.EtcdClientKeyFile)
		return nil
	})
}

func isLBFile(df runctx.DesiredFile) bool { return df.Note == "load balancer" }

// packageTimeout bounds a package installation (index refresh + download + install).
const packageTimeout = 10 * time.Minute

// Packages installs the missing LB packages (lbBinaries) with the host's package manager.
type Packages struct{ g *Group }

// Title is PhasePackages.
func (*Packages) Title() string { return PhasePackages }

// Mutates: the phase changes hosts.
func (*Packages) Mutates() bool { return true }

// ShouldRun: some LB host lacks a package.
func (ph *Packages) ShouldRun() bool {
	for _, p := range ph.g.plans {
		if len(p.packages) > 0 {
			return true
		}
	}
	return false
}

// Run does the phase's work.
func (ph *Packages) Run(ctx context.Context) error {
	b := ph.g
	return b.forEach(ctx, func(ctx context.Context, h frontHost) error {
		p := b.plans[h.host.Name]
		if len(p.packages) == 0 {
			return nil
		}
		cmd, err := provision.InstallCommand(b.facts[h.host.Name].PkgManager, p.packages)
		if err != nil {
			return fmt.Errorf("%s: %w", PhasePackages, err)
		}
		sctx, cancel := context.WithTimeout(ctx, packageTimeout)
		defer cancel()
		start := time.Now()
		if _, err := b.run.Exec(sctx, h.host.Name, PhasePackages, cmd); err != nil {
			return err
		}
		b.run.Printer.Hostf(h.host.Name, "installed %s (%s)", strings.Join(p.packages, " "), time.Since(start).Round(time.Second))
		return nil
	})
}

// Install applies the load balancer on every LB host with changes: stale staged files left by an
// interrupted run are removed; the CA bundle and sysctl file are uploaded in place (atomically);
// haproxy.cfg and keepalived.conf are uploaded next to the live files (*.hactl-new) and then
// lbApplyScript validates them with haproxy -c and keepalived --config-test, swaps them in keeping
// the previous files (*.prev), reloads (or enables and starts) the units, checks they work, and
// rolls back on failure. Errors are *LBApplyError.
type Install struct{ g *Group }

// Title is PhaseInstall.
func (*Install) Title() string { return PhaseInstall }

// Mutates: the phase changes hosts.
func (*Install) Mutates() bool { return true }

// ShouldRun: some LB host has a configuration to write, a unit to reload or start, or staged
// leftovers.
func (ph *Install) ShouldRun() bool {
	b := ph.g
	for _, h := range b.fronts {
		p := b.plans[h.host.Name]
		if h.lb && p != nil && (len(p.reload)+len(p.start) > 0 || slices.ContainsFunc(p.upload, isLBFile) || len(b.facts[h.host.Name].Stale) > 0) {
			return true
		}
	}
	return false
}

// Run does the phase's work.
func (ph *Install) Run(ctx context.Context) error {
	b := ph.g
	return b.forEach(ctx, func(ctx context.Context, h frontHost) error {
		if !h.lb {
			return nil
		}
		p := b.plans[h.host.Name]
		if stale := b.facts[h.host.Name].Stale; len(stale) > 0 {
			sctx, cancel := b.run.StepCtx(ctx)
			_, err := b.run.Exec(sctx, h.host.Name, PhaseInstall, "rm -f -- "+shell.Join(stale...))
			cancel()
			if err != nil {
				return err
			}
		}
		var files []provision.File
		var staged []string
		sysctl := false
		for _, df := range p.upload {
			if !isLBFile(df) {
				continue
			}
			path := df.Path
			switch df.Path {
			case lb.HAProxyConfigPath, lb.KeepalivedConfigPath:
				path += stagedSuffix
				staged = append(staged, df.Path)
			case lb.SysctlPath:
				sysctl = true
			}
			files = append(files, provision.File{Path: path, Mode: df.Mode, Content: df.Data, SHA256: df.Sum})
		}
		if len(files) == 0 && len(p.reload)+len(p.start) == 0 {
			return nil
		}
		sctx, cancel := b.run.StepCtx(ctx)
		defer cancel()
		if len(files) > 0 {
			if err := b.run.Upload(sctx, h.host.Name, PhaseInstall, files); err != nil {
				return err
			}
		}
		script := lbApplyScript(applyParams{
			haproxyPath: lb.HAProxyConfigPath, keepalivedPath: lb.KeepalivedConfigPath, checkSeconds: applyCheckSeconds,
			staged: staged, sysctl: sysctl, reload: p.reload, start: p.start,
			frontendPort: b.lbCfg.FrontendPort,
		})
		// Validation, reload and the checks after it take a few seconds; a rollback as long again.
		actx, acancel := context.WithTimeout(ctx, b.run.Spec.Spec.SSH.CommandTimeout.Duration+2*applyCheckSeconds*time.Second)
		defer acancel()
		res, err := b.run.Exec(actx, h.host.Name, PhaseInstall, script)
		if err != nil {
			var ce *provision.CommandError
			if errors.As(err, &ce) {
				out := strings.TrimSpace(ce.Stderr)
				switch ce.ExitCode {
				case applyInvalid:
					return &LBApplyError{Host: h.host.Name, Outcome: "invalid", Err: err, Output: out}
				case applyRolledBack:
					return &LBApplyError{Host: h.host.Name, Outcome: "rolled back", Err: err, Output: out}
				case applyBroken:
					return &LBApplyError{Host: h.host.Name, Outcome: "broken", Err: err, Output: out}
				}
			}
			return err
		}
		b.mu.Lock()
		b.installed = true
		b.mu.Unlock()
		b.run.Printer.Hostf(h.host.Name, "%s", strings.TrimSpace(string(res.Stdout)))
		return nil
	})
}

// applyCheckSeconds bounds the wait for a reloaded or started unit to work (lbApplyScript).
const applyCheckSeconds = 15

type applyParams struct {
	haproxyPath, keepalivedPath string   // the live files (lb.HAProxyConfigPath, lb.KeepalivedConfigPath)
	checkSeconds                int      // how long a unit gets to work after reload/start
	staged                      []string // live paths whose new content is at path+stagedSuffix
	sysctl                      bool     // lb.SysctlPath changed: load it
	reload                      []string // units to reload
	start                       []string // units to enable and (re)start
	frontendPort                int      // HAProxy's frontend port, checked listening after a reload
}

// lbApplyScript returns the POSIX sh script that swaps in an LB host's staged configuration.
//
//  1. Validate every staged file with its own tool: `haproxy -dW -c` (warnings are errors) and
//     `keepalived --config-test` (which checks the interface exists; it exits 0 on some problems and
//     only prints them, so any output fails too). Failure: the staged files are removed, exit
//     applyInvalid.
//  2. Swap: the live file is copied to *.prev (mode kept), the staged file renamed over it.
//  3. Load the sysctl file when it changed; reload the running units whose files changed (HAProxy:
//     master-worker reload, connections are kept; Keepalived: SIGHUP), enable and restart the
//     others.
//  4. Check, for up to applyCheckSeconds: HAProxy is active, answers its loopback /healthz and
//     itself listens on the frontend port (a reload whose new workers can't bind leaves the old ones
//     running, so only the port's owner shows it); Keepalived is active.
//  5. On failure: the *.prev files are put back and the units reloaded/restarted again and checked
//     (active, /healthz: the previous frontend port is not known here), exit applyRolledBack; without a previous configuration (first install) or if that fails too, exit
//     applyBroken with the unit's journal.
func lbApplyScript(p applyParams) string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	w("set -u")
	w("LC_ALL=C; export LC_ALL")
	w("HAP=%s KA=%s NEW=%s PREV=%s", shell.Quote(p.haproxyPath), shell.Quote(p.keepalivedPath),
		shell.Quote(stagedSuffix), shell.Quote(previousSuffix))
	w(`staged=%s`, shell.Quote(strings.Join(p.staged, " ")))
	w(`reload=%s`, shell.Quote(strings.Join(p.reload, " ")))
	w(`start=%s`, shell.Quote(strings.Join(p.start, " ")))
	w(`port=%d`, p.frontendPort)
	w(`healthz=%s`, shell.Quote(fmt.Sprintf("http://127.0.0.1:%d%s", lb.LocalPort, lb.HealthPath)))
	w(`checks=%d`, p.checkSeconds*5)
	sb.WriteString(`
unit_of() { case "$1" in "$HAP") echo haproxy;; "$KA") echo keepalived;; esac; }
clean() { for f in $staged; do rm -f -- "$f$NEW"; done; }
# 1. validate
for f in $staged; do
  case "$f" in
  "$HAP")
    if ! out=$(haproxy -dW -c -q -f "$f$NEW" 2>&1); then
      clean; printf 'haproxy -c -f %s%s refused it:\n%s\n' "$f" "$NEW" "$out" >&2; exit 3
    fi;;
  "$KA")
    out=$(keepalived --config-test -f "$f$NEW" 2>&1); rc=$?
    if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
      clean; printf 'keepalived --config-test -f %s%s refused it (exit %s):\n%s\n' "$f" "$NEW" "$rc" "$out" >&2; exit 3
    fi;;
  esac
done
# 2. swap, keeping the previous files
swapped=""
for f in $staged; do
  if [ -f "$f" ]; then cp -p -- "$f" "$f$PREV" || exit 1; fi
  mv -f -- "$f$NEW" "$f" || exit 1
  swapped="$swapped $f"
done
`)
	if p.sysctl {
		w("sysctl -q -p %s >&2 || exit 1", shell.Quote(lb.SysctlPath))
	}
	sb.WriteString(`
# 3. reload or start
apply() { # unit verb
  case "$2" in
  reload) systemctl reload "$1";;
  start) systemctl enable --quiet "$1" && systemctl restart "$1";;
  esac
}
works() { # unit [port]: the port check is skipped after a rollback (the previous port is not known here)
  case "$1" in
  haproxy) systemctl is-active --quiet haproxy &&
    curl --silent --fail --output /dev/null --max-time 1 --noproxy 127.0.0.1 "$healthz" &&
    { [ -z "${2:-}" ] || ss -Hltnp "sport = :$2" 2>/dev/null | grep -q '"haproxy"'; };;
  keepalived) systemctl is-active --quiet keepalived;;
  esac
}
expect() { # unit: what works checks
  case "$1" in
  haproxy) echo "want: unit active, $healthz answering, haproxy listening on port $port";;
  keepalived) echo "want: unit active";;
  esac
}
wait_works() { # unit [port]
  i=0
  while [ "$i" -lt "$checks" ]; do
    if works "$1" "${2:-}"; then return 0; fi
    i=$((i + 1)); sleep 0.2
  done
  return 1
}
failed=""; done_msg=""
for pair in $(for u in $reload; do echo "$u:reload"; done; for u in $start; do echo "$u:start"; done); do
  u=${pair%%:*}; verb=${pair#*:}
  if out=$(apply "$u" "$verb" 2>&1) && wait_works "$u" "$port"; then
    case "$verb" in reload) done_msg="$done_msg, reloaded $u";; start) done_msg="$done_msg, started $u";; esac
  else
    failed="$failed $u"
    if [ -n "$out" ]; then
      printf '%s %s failed: %s\n' "$u" "$verb" "$out" >&2
    else
      printf '%s %s: not working within %ss (%s)\n' "$u" "$verb" "$((checks / 5))" "$(expect "$u")" >&2
    fi
  fi
done
if [ -z "$failed" ]; then
  echo "load balancer: wrote${swapped:- nothing}${done_msg}"
  exit 0
fi
# 5. roll back
broken=0
for u in $failed; do
  journalctl -u "$u" -n 15 --no-pager -o cat >&2 2>/dev/null
  restored=0
  for f in $swapped; do
    if [ "$(unit_of "$f")" = "$u" ] && [ -f "$f$PREV" ]; then
      cp -p -- "$f$PREV" "$f$NEW" && mv -f -- "$f$NEW" "$f" && restored=1
    fi
  done
  if [ "$restored" = 1 ] && { systemctl reload "$u" 2>/dev/null || systemctl restart "$u"; } && wait_works "$u" ""; then
    printf '%s: rolled back to the previous configuration; it is running\n' "$u" >&2
  else
    broken=1
    printf '%s: no working previous configuration to roll back to\n' "$u" >&2
  fi
done
if [ "$broken" = 1 ]; then exit 5; fi
exit 4
`)
	return sb.String()
}

// vipWait bounds lbWait: keepalived elects a holder within a few advert intervals (3 x advert_int
// + skew with preemption, RFC 5798 §6.4.2), plus the check script's rise time.
const vipWait = 60 * time.Second

// Wait waits until exactly one LB host holds the VIP, and reports it. The backends may still be
// DOWN (no apiserver yet before kubeadm init): that is for hactl status to show.
type Wait struct{ g *Group }

// Title is PhaseWait.
func (*Wait) Title() string { return PhaseWait }

// Mutates: the phase waits for what lb/install changed (a dry run stops before it).
func (*Wait) Mutates() bool { return true }

// ShouldRun: the load balancer was planned.
func (ph *Wait) ShouldRun() bool { return ph.g.lbCfg != nil }

// Run does the phase's work. Errors: no holder or several holders after vipWait.
func (ph *Wait) Run(ctx context.Context) error {
	b := ph.g
	var lbHosts []frontHost
	for _, h := range b.fronts {
		if h.lb {
			lbHosts = append(lbHosts, h)
		}
	}
	vip := b.lbCfg.VIP.Addr()
	// Nothing changed on the LB hosts: the addresses preflight gathered still say who holds the VIP
	// (no command needed when exactly one does).
	holders, known := b.holdersFromFacts(lbHosts, vip)
	if known && len(holders) == 1 && !b.installed {
		b.vipHolder = holders[0]
		b.run.Printer.Infof("  VIP %s is on %s", vip, holders[0])
		return nil
	}
	var pollErr error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, vipWait, true, func(ctx context.Context) (bool, error) {
		var h []string
		h, pollErr = b.vipHolders(ctx, lbHosts, vip)
		if pollErr != nil {
			return false, pollErr
		}
		holders = h
		return len(holders) == 1, nil
	})
	switch {
	case err == nil:
		b.vipHolder = holders[0]
		b.run.Printer.Infof("  VIP %s is on %s", vip, holders[0])
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case pollErr != nil && !errors.Is(pollErr, context.DeadlineExceeded):
		return pollErr
	case len(holders) == 0:
		return fmt.Errorf("%s: no LB host took the VIP %s within %s: check `journalctl -u keepalived` on %s", PhaseWait, vip, vipWait, hostNames(lbHosts))
	}
	return fmt.Errorf("%s: the VIP %s is on several hosts (%s) after %s: VRRP advertisements don't pass between them (firewall, virtual_router_id clash?)", PhaseWait, vip, strings.Join(holders, ", "), vipWait)
}

// holdersFromFacts returns the LB hosts whose addresses, as preflight gathered them, carry vip;
// known is false when some host's addresses are not known.
func (b *Group) holdersFromFacts(hosts []frontHost, vip netip.Addr) (holders []string, known bool) {
	for _, h := range hosts {
		f := b.facts[h.host.Name]
		if f == nil || f.Addrs == nil {
			return nil, false
		}
		if slices.ContainsFunc(f.Addrs, func(a lb.IfAddr) bool { return a.Prefix.Addr() == vip }) {
			holders = append(holders, h.host.Name)
		}
	}
	return holders, true
}

// vipHolders returns the LB hosts whose interfaces carry vip now.
func (b *Group) vipHolders(ctx context.Context, hosts []frontHost, vip netip.Addr) ([]string, error) {
	held := make([]bool, len(hosts))
	err := provision.ForEach(ctx, hosts, b.run.Spec.Spec.SSH.MaxParallel, func(h frontHost) string { return h.host.Name },
		func(ctx context.Context, h frontHost) error {
			sctx, cancel := b.run.StepCtx(ctx)
			defer cancel()
			res, err := b.run.Exec(sctx, h.host.Name, PhaseWait, "ip -json addr show")
			if err != nil {
				return err
			}
			addrs, err := lb.ParseIPAddrJSON(res.Stdout)
			if err != nil {
				return fmt.Errorf("%s: %w", PhaseWait, err)
			}
			for _, a := range addrs {
				if a.Prefix.Addr() == vip {
					held[slices.IndexFunc(hosts, func(x frontHost) bool { return x.host.Name == h.host.Name })] = true
				}
			}
			return nil
		})
	var out []string
	for i, h := range hosts {
		if held[i] {
			out = append(out, h.host.Name)
		}
	}
	return out, err
}

func hostNames(hs []frontHost) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.host.Name
	}
	return strings.Join(names, ", ")
}
