package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/ui"
)

// The hosts in front of etcd: control-plane hosts (they get kube-apiserver's etcd client
// credentials at kubeadm's paths) and load balancer hosts (HAProxy + Keepalived, lb.Plan). A host may
// be both (colocated topology) and may also be an etcd member (then its SSH connection is shared).

// frontHost is one control-plane or LB host.
type frontHost struct {
	host v1alpha1.Host
	addr netip.Addr
	cp   bool // role control-plane: gets the etcd CA and apiserver-etcd-client certificate
	lb   bool // runs HAProxy + Keepalived (lb.Config.Nodes)
}

// frontFacts is what one read-only command reports about a front host (frontFactsScript).
type frontFacts struct {
	OSID, OSLike string            // os-release ID and ID_LIKE
	PkgManager   string            // apt-get, dnf or yum; "" when none was found
	Have         map[string]bool   // binaries found on PATH (lbBinaries)
	Sums         map[string]string // remote path → sha256 hex, for existing files
	Active       map[string]string // unit → systemctl is-active ("active", "inactive", "failed"...)
	Enabled      map[string]string // unit → systemctl is-enabled ("enabled", "disabled", "" when unknown)
	Stale        []string          // staged files left by an interrupted run
	Addrs        []lb.IfAddr       // the host's addresses (ip -json addr show)
}

// frontPlan is what will happen on one front host.
type frontPlan struct {
	packages []string      // packages to install (binaries missing)
	upload   []desiredFile // files whose content differs (configs are staged, see lbInstall)
	reload   []string      // units to reload (running, config changed)
	start    []string      // units to enable and start (not running)
	iface    string        // the VIP's interface (LB hosts)
	priority int           // VRRP priority (LB hosts)
}

func (p *frontPlan) changes() bool {
	return len(p.packages)+len(p.upload)+len(p.reload)+len(p.start) > 0
}

// lbBinaries are the commands an LB host needs, each from the package of the same name in Debian,
// Ubuntu, RHEL and Fedora: haproxy, keepalived, and curl (Keepalived's check of the local HAProxy,
// lb.CheckCommand).
var lbBinaries = []string{"haproxy", "keepalived", "curl"}

// LB units, reloaded (not restarted) when their configuration changes.
const (
	haproxyUnit    = "haproxy"
	keepalivedUnit = "keepalived"
)

// stagedSuffix marks a new configuration uploaded next to the live one, validated on the host, then
// renamed over it; previousSuffix keeps the configuration it replaced (for rollback and for people).
const (
	stagedSuffix   = ".hactl-new"
	previousSuffix = ".prev"
)

// frontHosts returns the control-plane and LB hosts in spec order.
func (b *Bootstrapper) frontHosts() []frontHost {
	lbHosts := map[string]bool{}
	for _, h := range b.spec.LBHosts() {
		lbHosts[h.Name] = true
	}
	var out []frontHost
	for _, h := range b.spec.Spec.Hosts {
		fh := frontHost{host: h, cp: h.HasRole(v1alpha1.RoleControlPlane), lb: lbHosts[h.Name]}
		if !fh.cp && !fh.lb {
			continue
		}
		fh.addr, _ = netip.ParseAddr(h.Address) // validated by v1alpha1.Load
		out = append(out, fh)
	}
	return out
}

func (b *Bootstrapper) anyFront() bool { return len(b.fronts) > 0 }

// forEachFront runs fn on every front host with the spec's concurrency cap; errors per host.
func (b *Bootstrapper) forEachFront(ctx context.Context, fn func(ctx context.Context, h frontHost) error) error {
	return provision.ForEach(ctx, b.fronts, b.spec.Spec.SSH.MaxParallel,
		func(h frontHost) string { return h.host.Name }, fn)
}

// frontPaths lists every file hactl manages on a front host (checksummed by frontFactsScript).
func frontPaths(h frontHost) []string {
	var paths []string
	if h.cp {
		paths = append(paths, kubeadm.EtcdCAFile, kubeadm.EtcdClientCertFile, kubeadm.EtcdClientKeyFile)
	}
	if h.lb {
		paths = append(paths, lb.HAProxyConfigPath, lb.KeepalivedConfigPath, lb.RemoteCAFile, lb.SysctlPath)
	}
	return paths
}

// stagedPaths are the staged configuration files of an LB host.
func stagedPaths() []string {
	return []string{lb.HAProxyConfigPath + stagedSuffix, lb.KeepalivedConfigPath + stagedSuffix}
}

// frontFactsScript is the one read-only command that reports a front host's facts, one fact per
// line, "tag|value|...": os, pm, bin, sum, svc, stale, addr (parseFrontFacts).
func frontFactsScript(paths []string) string {
	return `LC_ALL=C; export LC_ALL
if [ -r /etc/os-release ]; then . /etc/os-release; fi
echo "os|${ID:-}|${ID_LIKE:-}"
for pm in apt-get dnf yum; do
  if command -v "$pm" >/dev/null 2>&1; then echo "pm|$pm"; break; fi
done
for b in ` + strings.Join(lbBinaries, " ") + `; do
  if command -v "$b" >/dev/null 2>&1; then echo "bin|$b"; fi
done
for f in ` + shell.Join(paths...) + `; do
  if [ -f "$f" ]; then echo "sum|$(sha256sum <"$f" | cut -d' ' -f1)|$f"; fi
done
for u in ` + haproxyUnit + ` ` + keepalivedUnit + `; do
  echo "svc|$u|$(systemctl is-active "$u" 2>/dev/null)|$(systemctl is-enabled "$u" 2>/dev/null)"
done
for f in ` + shell.Join(stagedPaths()...) + `; do
  if [ -e "$f" ]; then echo "stale|$f"; fi
done
if command -v ip >/dev/null 2>&1; then echo "addr|$(ip -json addr show | tr -d '\n')"; fi
`
}

// parseFrontFacts parses frontFactsScript's output. Unknown tags are ignored (newer scripts).
func parseFrontFacts(out []byte) (*frontFacts, error) {
	f := &frontFacts{Have: map[string]bool{}, Sums: map[string]string{}, Active: map[string]string{}, Enabled: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20) // ip -json addr: one long line
	sawOS := false
	for sc.Scan() {
		tag, rest, _ := strings.Cut(sc.Text(), "|")
		fields := strings.Split(rest, "|")
		switch tag {
		case "os":
			sawOS = true
			f.OSID = fields[0]
			if len(fields) > 1 {
				f.OSLike = fields[1]
			}
		case "pm":
			f.PkgManager = rest
		case "bin":
			f.Have[rest] = true
		case "sum":
			if len(fields) == 2 && isSHA256(fields[0]) {
				f.Sums[fields[1]] = fields[0]
			}
		case "svc":
			if len(fields) == 3 {
				f.Active[fields[0]], f.Enabled[fields[0]] = fields[1], fields[2]
			}
		case "stale":
			f.Stale = append(f.Stale, rest)
		case "addr":
			addrs, err := lb.ParseIPAddrJSON([]byte(rest))
			if err != nil {
				return nil, fmt.Errorf("ip -json addr show: %w", err)
			}
			f.Addrs = addrs
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !sawOS {
		return nil, fmt.Errorf("unexpected facts output (no os line): %q", firstLine(out))
	}
	return f, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// frontPreflight connects to every front host that is not an etcd member (members are connected by
// preflight) and gathers its facts with one read-only command.
func (b *Bootstrapper) frontPreflight(ctx context.Context) error {
	return b.forEachFront(ctx, func(ctx context.Context, h frontHost) error {
		if b.client(h.host.Name) == nil {
			c, err := b.dialer.Dial(ctx, provision.TargetOf(h.host))
			if err != nil {
				return err
			}
			b.mu.Lock()
			b.clients[h.host.Name] = c
			b.mu.Unlock()
		}
		sctx, cancel := b.stepCtx(ctx)
		defer cancel()
		res, err := b.run(sctx, h.host.Name, "front/facts", frontFactsScript(frontPaths(h)))
		if err != nil {
			return err
		}
		f, err := parseFrontFacts(res.Stdout)
		if err != nil {
			return fmt.Errorf("front/facts: %w", err)
		}
		b.mu.Lock()
		b.frontFacts[h.host.Name] = f
		b.mu.Unlock()
		if h.lb {
			var missing []string
			for _, bin := range lbBinaries {
				if !f.Have[bin] {
					missing = append(missing, bin)
				}
			}
			if len(missing) > 0 && f.PkgManager == "" {
				return fmt.Errorf("front/facts: %s missing and no package manager (apt-get, dnf, yum) found on %s %s: install them by hand",
					strings.Join(missing, ", "), f.OSID, f.OSLike)
			}
			b.p.Hostf(h.host.Name, "%s, haproxy %s, keepalived %s%s", orDash(f.OSID), orDash(f.Active[haproxyUnit]), orDash(f.Active[keepalivedUnit]),
				map[bool]string{true: ", to install: " + strings.Join(missing, " "), false: ""}[len(missing) > 0])
		}
		return nil
	})
}

// frontPlanPhase decides, for every front host, what to install: the etcd client credentials on
// control-plane hosts; packages, haproxy.cfg, keepalived.conf (interface detected from the host's
// addresses unless the spec names it), the CA bundle and sysctls on LB hosts; which units to
// reload or start. It prints the plan and changes nothing.
func (b *Bootstrapper) frontPlanPhase(ctx context.Context) error {
	if b.spec.Spec.LoadBalancer != nil {
		cfg, err := lb.Plan(b.spec)
		if err != nil {
			return err
		}
		if b.lbSecret, err = specload.ReadAuthSecret(b.spec, os.Getenv); err != nil {
			return fmt.Errorf("spec.loadBalancer.auth: %w", err)
		}
		for _, n := range cfg.Nodes {
			f := b.frontFacts[n.Name]
			if n.Interface == "" {
				iface, err := lb.InterfaceFor(cfg.VIP, f.Addrs)
				if err != nil {
					return fmt.Errorf("%s: %w", n.Name, err)
				}
				if err := cfg.SetInterface(n.Name, iface); err != nil {
					return err
				}
			} else if !slices.ContainsFunc(f.Addrs, func(a lb.IfAddr) bool { return a.Interface == n.Interface }) {
				return fmt.Errorf("%s: spec.loadBalancer.interface %q has no address on this host (it has %s)", n.Name, n.Interface, ifaceNames(f.Addrs))
			}
		}
		b.lbCfg = cfg
		for _, n := range cfg.Notes {
			b.p.Infof("  note: %s", n)
		}
	}
	for _, h := range b.fronts {
		p, err := b.planFront(h)
		if err != nil {
			return fmt.Errorf("%s: %w", h.host.Name, err)
		}
		b.frontPlans[h.host.Name] = p
	}
	b.printFrontPlan()
	return nil
}

func ifaceNames(addrs []lb.IfAddr) string {
	var names []string
	for _, a := range addrs {
		if !slices.Contains(names, a.Interface) {
			names = append(names, a.Interface)
		}
	}
	return strings.Join(names, ", ")
}

// frontFiles returns the files host h must have, with their content.
func (b *Bootstrapper) frontFiles(h frontHost) ([]desiredFile, error) {
	var files []desiredFile
	if h.cp {
		dir := b.creds.pkiDir
		for _, f := range []struct {
			remote, local string
			mode          os.FileMode
		}{
			{kubeadm.EtcdCAFile, pki.CertPath(dir, "ca"), 0o644},
			{kubeadm.EtcdClientCertFile, pki.CertPath(dir, apiserverTag), 0o644},
			{kubeadm.EtcdClientKeyFile, pki.KeyPath(dir, apiserverTag), 0o600},
		} {
			df := desiredFile{Path: f.remote, Mode: f.mode, Note: "kube-apiserver's etcd credentials"}
			data, err := os.ReadFile(f.local)
			switch {
			case err == nil:
				df.Data, df.Sum = data, sum(data)
			case b.opt.DryRun && os.IsNotExist(err):
				// created by the pki phase of a real run
			default:
				return nil, fmt.Errorf("etcd client credentials for kube-apiserver: %w", err)
			}
			files = append(files, df)
		}
	}
	if h.lb {
		cfg := b.lbCfg
		hap, err := lb.RenderHAProxy(cfg, h.host.Name)
		if err != nil {
			return nil, err
		}
		ka, err := lb.RenderKeepalived(cfg, h.host.Name, b.lbSecret)
		if err != nil {
			return nil, err
		}
		files = append(files,
			desiredFile{Path: lb.HAProxyConfigPath, Mode: 0o644, Data: hap, Sum: sum(hap), Note: "load balancer"},
			desiredFile{Path: lb.KeepalivedConfigPath, Mode: 0o600, Data: ka, Sum: sum(ka), Note: "load balancer"})
		if cfg.HealthCheck.LocalCAFile != "" {
			ca, err := os.ReadFile(cfg.HealthCheck.LocalCAFile)
			if err != nil {
				return nil, fmt.Errorf("spec.loadBalancer.healthCheck.caFile: %w", err)
			}
			files = append(files, desiredFile{Path: lb.RemoteCAFile, Mode: 0o644, Data: ca, Sum: sum(ca), Note: "load balancer"})
		}
		if len(cfg.Sysctls) > 0 {
			var sb strings.Builder
			sb.WriteString("# Written by hactl: kernel settings the kube-apiserver load balancer needs.\n")
			for _, s := range cfg.Sysctls {
				sb.WriteString(s.String() + "\n")
			}
			data := []byte(sb.String())
			files = append(files, desiredFile{Path: lb.SysctlPath, Mode: 0o644, Data: data, Sum: sum(data), Note: "load balancer"})
		}
	}
	return files, nil
}

// planFront compares host h's files and units with what they must be.
func (b *Bootstrapper) planFront(h frontHost) (*frontPlan, error) {
	f := b.frontFacts[h.host.Name]
	p := &frontPlan{}
	files, err := b.frontFiles(h)
	if err != nil {
		return nil, err
	}
	changed := map[string]bool{}
	for _, df := range files {
		if df.Sum == "" || f.Sums[df.Path] != df.Sum {
			p.upload = append(p.upload, df)
			changed[df.Path] = true
		}
	}
	if !h.lb {
		return p, nil
	}
	n := b.lbCfg.Node(h.host.Name)
	p.iface, p.priority = n.Interface, n.Priority
	for _, bin := range lbBinaries {
		if !f.Have[bin] {
			p.packages = append(p.packages, bin)
		}
	}
	haproxyChanged := changed[lb.HAProxyConfigPath] || changed[lb.RemoteCAFile] || changed[lb.SysctlPath]
	for _, u := range []struct {
		unit    string
		changed bool
	}{{haproxyUnit, haproxyChanged}, {keepalivedUnit, changed[lb.KeepalivedConfigPath]}} {
		switch {
		case f.Active[u.unit] != "active" || f.Enabled[u.unit] != "enabled":
			p.start = append(p.start, u.unit)
		case u.changed:
			p.reload = append(p.reload, u.unit)
		}
	}
	return p, nil
}

// describe lists the plan's changes: "install haproxy", "write /etc/haproxy/haproxy.cfg",
// "reload haproxy", "start keepalived".
func (p *frontPlan) describe() []string {
	var out []string
	for _, pkg := range p.packages {
		out = append(out, "install "+pkg)
	}
	var files []string
	for _, f := range p.upload {
		files = append(files, "write "+f.Path)
	}
	sort.Strings(files)
	out = append(out, files...)
	for _, u := range p.reload {
		out = append(out, "reload "+u)
	}
	for _, u := range p.start {
		out = append(out, "start "+u)
	}
	return out
}

func (b *Bootstrapper) printFrontPlan() {
	var rows [][]string
	for _, h := range b.fronts {
		p := b.frontPlans[h.host.Name]
		var roles, parts []string
		if h.cp {
			roles = append(roles, string(v1alpha1.RoleControlPlane))
		}
		if h.lb {
			roles = append(roles, fmt.Sprintf("lb (priority %d, %s)", p.priority, p.iface))
		}
		parts = p.describe()
		what := "unchanged"
		if len(parts) > 0 {
			what = strings.Join(parts, ", ")
		}
		rows = append(rows, []string{h.host.Name, h.host.Zone, strings.Join(roles, ", "), what})
	}
	if len(rows) == 0 {
		return
	}
	var sb strings.Builder
	if b.lbCfg != nil {
		fmt.Fprintf(&sb, "load balancer: VIP %s, virtual_router_id %d, %s, backends", b.lbCfg.VIP, b.lbCfg.VirtualRouterID, b.lbCfg.Mode)
		for _, be := range b.lbCfg.Backends {
			fmt.Fprintf(&sb, " %s", be.AddrPort())
		}
		sb.WriteString("\n")
	}
	ui.Table(&sb, []string{"HOST", "ZONE", "ROLES", "CHANGES"}, rows)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		b.p.Infof("  %s", line)
	}
}

// frontFactsKnown: kube/preflight ran for every front host (not skipped).
func (b *Bootstrapper) frontFactsKnown() bool {
	return b.anyFront() && len(b.frontFacts) == len(b.fronts)
}

// hasLB: the load balancer was planned.
func (b *Bootstrapper) hasLB() bool { return b.lbCfg != nil }
