// Package frontphases is the "kube front" phase group of `hactl bootstrap`: the hosts in front of
// etcd. Control-plane hosts get kube-apiserver's etcd client credentials at kubeadm's paths; load
// balancer hosts get HAProxy + Keepalived (lb.Plan) holding the kube-apiserver VIP. A host may be
// both (colocated topology) and may also be an etcd member (then its SSH connection and its facts
// command are shared with the etcd group through runctx). Phases: kube/preflight → kube/plan (after
// etcd's plan, so a dry run shows it) → kube/etcd-certs → lb/packages → lb/install → lb/wait (after
// etcd/wait).
package frontphases

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/ui"
)

// Phase titles: the identity other groups insert their phases by (phase.List).
const (
	PhasePreflight = "lb/preflight"
	PhasePlan      = "lb/plan"
	PhaseEtcdCerts = "kube/etcd-certs"
	PhasePackages  = "lb/packages"
	PhaseInstall   = "lb/install"
	PhaseWait      = "lb/wait"
)

// Group is the kube front phases' state for one run.
type Group struct {
	run    *runctx.Run
	fronts []frontHost

	mu    sync.Mutex
	facts map[string]*frontFacts
	plans map[string]*frontPlan

	lbCfg     *lb.Config    // nil without spec.loadBalancer
	lbSecret  lb.AuthSecret // the VRRP secret, when spec.loadBalancer.auth is set
	vipHolder string        // the LB host holding the VIP after lb/wait
	installed bool          // lb/install changed an LB host (its VIP may move)
}

// OwnedUnits are the LB hosts' units hactl manages: the packages' HAProxy and Keepalived units,
// configured through the files lb/install writes only (no drop-in or environment file of hactl's);
// what their packages' environment files set by default is no override.
var OwnedUnits = []provision.OwnedUnitFiles{{Unit: haproxyUnit}, {Unit: keepalivedUnit, PackageDefaults: []string{`KEEPALIVED_OPTIONS="-D"`}}}

// New prepares the group and registers the facts it needs from every front host with run. It
// contacts nothing.
func New(run *runctx.Run) *Group {
	g := &Group{run: run, facts: map[string]*frontFacts{}, plans: map[string]*frontPlan{}}
	g.fronts = frontHosts(run.Spec)
	for _, h := range g.fronts {
		run.Need(h.host, factsRequest(h))
		if h.lb {
			run.Manage(h.host, OwnedUnits...)
		}
	}
	return g
}

// Phases returns the group's phases in their order (bootstrap interleaves them with etcd's).
func (g *Group) Phases() phase.List {
	return phase.List{&Preflight{g}, &Plan{g}, &EtcdCerts{g}, &Packages{g}, &Install{g}, &Wait{g}}
}

// Report returns every front host's outcome, in spec order.
func (g *Group) Report() []report.Host {
	var out []report.Host
	for _, h := range g.fronts {
		hr := report.Host{Name: h.host.Name, Zone: h.host.Zone, Address: h.addr.String(), Action: "unchanged", Commands: g.run.Commands(h.host.Name)}
		for _, role := range h.host.Roles {
			hr.Roles = append(hr.Roles, string(role))
		}
		if p := g.plans[h.host.Name]; p != nil {
			hr.Changes = p.describe()
		}
		if len(hr.Changes) > 0 {
			hr.Action = "changed"
		}
		out = append(out, hr)
	}
	return out
}

// Untouched reports the front hosts of run's spec for a run that does not plan them (hactl
// restore): every one "unchanged", with the SSH commands the run sent it (a member's connection is
// shared). It registers no facts.
func Untouched(run *runctx.Run) []report.Host {
	g := &Group{run: run, fronts: frontHosts(run.Spec), facts: map[string]*frontFacts{}, plans: map[string]*frontPlan{}}
	return g.Report()
}

// VIP returns the load balancer's VIP and the LB host holding it after lb/wait ("" without a load
// balancer).
func (g *Group) VIP() (vip, holder string) {
	if g.lbCfg == nil {
		return "", ""
	}
	return g.lbCfg.VIP.Addr().String(), g.vipHolder
}

// frontHost is one control-plane or LB host.
type frontHost struct {
	host v1alpha1.Host
	addr netip.Addr
	cp   bool // role control-plane: gets the etcd CA and apiserver-etcd-client certificate
	lb   bool // runs HAProxy + Keepalived (lb.Config.Nodes)
}

// frontFacts is the group's view of what preflight gathered on a front host (factsFrom).
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
	packages []string             // packages to install (binaries missing)
	upload   []runctx.DesiredFile // files whose content differs (configs are staged, see Install)
	reload   []string             // units to reload (running, config changed)
	start    []string             // units to enable and start (not running)
	iface    string               // the VIP's interface (LB hosts)
	priority int                  // VRRP priority (LB hosts)
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
func frontHosts(spec *v1alpha1.Cluster) []frontHost {
	lbHosts := map[string]bool{}
	for _, h := range spec.LBHosts() {
		lbHosts[h.Name] = true
	}
	var out []frontHost
	for _, h := range spec.Spec.Hosts {
		fh := frontHost{host: h, cp: h.HasRole(v1alpha1.RoleControlPlane), lb: lbHosts[h.Name]}
		if !fh.cp && !fh.lb {
			continue
		}
		fh.addr, _ = netip.ParseAddr(h.Address) // validated by specload.Load
		out = append(out, fh)
	}
	return out
}

// forEach runs fn on every front host with the spec's concurrency cap; errors per host.
func (g *Group) forEach(ctx context.Context, fn func(ctx context.Context, h frontHost) error) error {
	return provision.ForEach(ctx, g.fronts, g.run.Spec.Spec.SSH.MaxParallel,
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

// factsRequest is what preflight gathers on front host h (one command with the other groups'
// requests, runctx.Run.Connect): the managed files' (and staged leftovers') checksums, which LB
// binaries are on PATH, the LB units' states, and the host's addresses. The OS and package manager
// come with the connection (provision.HostInfo).
func factsRequest(h frontHost) provision.FactsRequest {
	r := provision.FactsRequest{Files: frontPaths(h)}
	if h.lb {
		r.Files = append(r.Files, stagedPaths()...)
		r.Commands = lbBinaries
		r.Units = []string{haproxyUnit, keepalivedUnit}
		r.Addrs = true
	}
	return r
}

// factsFrom reads the group's view of front host h from the gathered facts. Errors: the host's
// `ip -json addr` output does not parse.
func factsFrom(h frontHost, pf *provision.Facts) (*frontFacts, error) {
	f := &frontFacts{OSID: pf.Host.OSID, OSLike: pf.Host.OSLike, PkgManager: pf.Host.PackageManager, Have: map[string]bool{},
		Sums: map[string]string{}, Active: map[string]string{}, Enabled: map[string]string{}}
	for c := range pf.Commands {
		f.Have[c] = true
	}
	staged := stagedPaths()
	for p, sum := range pf.Sums {
		if slices.Contains(staged, p) {
			if h.lb {
				f.Stale = append(f.Stale, p)
			}
			continue
		}
		f.Sums[p] = sum
	}
	sort.Strings(f.Stale)
	for _, u := range []string{haproxyUnit, keepalivedUnit} {
		if st, ok := pf.Units[u]; ok {
			f.Active[u], f.Enabled[u] = st.Active, st.Enabled
		}
	}
	if pf.AddrsJSON != nil {
		addrs, err := lb.ParseIPAddrJSON(pf.AddrsJSON)
		if err != nil {
			return nil, fmt.Errorf("ip -json addr show: %w", err)
		}
		f.Addrs = addrs
	}
	return f, nil
}

// Preflight checks every front host's facts (gathered by preflight, runctx.Run.Connect): an LB
// host missing haproxy, keepalived or curl must have a package manager to install them with.
type Preflight struct{ g *Group }

// Title is PhasePreflight.
func (*Preflight) Title() string { return PhasePreflight }

// ShouldRun: the spec has control-plane or LB hosts.
func (ph *Preflight) ShouldRun() bool { return len(ph.g.fronts) > 0 }

// Run does the phase's work. Errors are aggregated per host.
func (ph *Preflight) Run(ctx context.Context) error {
	g := ph.g
	front := map[string]frontHost{}
	for _, h := range g.fronts {
		front[h.host.Name] = h
	}
	// Connect is a no-op for hosts preflight reached; it only dials front hosts it could not.
	return g.run.Connect(ctx, func(ctx context.Context, host string) error {
		h, ok := front[host]
		if !ok {
			return nil
		}
		f, err := factsFrom(h, g.run.Facts(host))
		if err != nil {
			return fmt.Errorf("%s: %w", runctx.FactsStep, err)
		}
		g.mu.Lock()
		g.facts[host] = f
		g.mu.Unlock()
		if !h.lb {
			return nil
		}
		var missing []string
		for _, bin := range lbBinaries {
			if !f.Have[bin] {
				missing = append(missing, bin)
			}
		}
		if len(missing) > 0 && f.PkgManager == "" {
			return fmt.Errorf("%s: %s missing and no package manager (apt-get, dnf, yum) found on %s %s: install them by hand",
				runctx.FactsStep, strings.Join(missing, ", "), f.OSID, f.OSLike)
		}
		toInstall := ""
		if len(missing) > 0 {
			toInstall = ", to install: " + strings.Join(missing, " ")
		}
		g.run.Printer.Hostf(host, "%s, haproxy %s, keepalived %s%s", orDash(f.OSID), orDash(f.Active[haproxyUnit]), orDash(f.Active[keepalivedUnit]), toInstall)
		return nil
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Plan decides, for every front host, what to install: the etcd client credentials on
// control-plane hosts; packages, haproxy.cfg, keepalived.conf (interface detected from the host's
// addresses unless the spec names it), the CA bundle and sysctls on LB hosts; which units to
// reload or start. It prints the plan and changes nothing.
type Plan struct{ g *Group }

// Title is PhasePlan.
func (*Plan) Title() string { return PhasePlan }

// ShouldRun: kube/preflight ran for every front host (not skipped).
func (ph *Plan) ShouldRun() bool { return len(ph.g.fronts) > 0 && len(ph.g.facts) == len(ph.g.fronts) }

// Run does the phase's work. Errors: the load balancer cannot be planned (lb.Plan), its secret
// cannot be read, or a host lacks the VIP's interface.
func (ph *Plan) Run(ctx context.Context) error {
	b := ph.g
	spec := b.run.Spec
	if spec.ManagedLB() != nil {
		cfg, err := lb.Plan(spec)
		if err != nil {
			return err
		}
		if b.lbSecret, err = specload.ReadAuthSecret(spec, os.Getenv); err != nil {
			return fmt.Errorf("spec.loadBalancer.auth: %w", err)
		}
		for _, n := range cfg.Nodes {
			f := b.facts[n.Name]
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
			b.run.Printer.Infof("  note: %s", n)
		}
	}
	for _, h := range b.fronts {
		p, err := b.planFront(h)
		if err != nil {
			return fmt.Errorf("%s: %w", h.host.Name, err)
		}
		b.plans[h.host.Name] = p
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
func (b *Group) frontFiles(h frontHost) ([]runctx.DesiredFile, error) {
	var files []runctx.DesiredFile
	if h.cp {
		dir := filepath.Join(b.run.Spec.Spec.StateDir, "pki")
		for _, f := range []struct {
			remote, local string
			mode          os.FileMode
		}{
			{kubeadm.EtcdCAFile, pki.CertPath(dir, "ca"), 0o644},
			{kubeadm.EtcdClientCertFile, pki.CertPath(dir, pki.APIServerClient), 0o644},
			{kubeadm.EtcdClientKeyFile, pki.KeyPath(dir, pki.APIServerClient), 0o600},
		} {
			df := runctx.DesiredFile{Path: f.remote, Mode: f.mode, Note: "kube-apiserver's etcd credentials"}
			data, err := os.ReadFile(f.local)
			switch {
			case err == nil:
				df.Data, df.Sum = data, runctx.Sum(data)
			case b.run.DryRun && os.IsNotExist(err):
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
			runctx.DesiredFile{Path: lb.HAProxyConfigPath, Mode: 0o644, Data: hap, Sum: runctx.Sum(hap), Note: "load balancer"},
			runctx.DesiredFile{Path: lb.KeepalivedConfigPath, Mode: 0o600, Data: ka, Sum: runctx.Sum(ka), Note: "load balancer"})
		if cfg.HealthCheck.LocalCAFile != "" {
			ca, err := os.ReadFile(cfg.HealthCheck.LocalCAFile)
			if err != nil {
				return nil, fmt.Errorf("spec.loadBalancer.healthCheck.caFile: %w", err)
			}
			files = append(files, runctx.DesiredFile{Path: lb.RemoteCAFile, Mode: 0o644, Data: ca, Sum: runctx.Sum(ca), Note: "load balancer"})
		}
		if len(cfg.Sysctls) > 0 {
			var sb strings.Builder
			sb.WriteString("# Written by hactl: kernel settings the kube-apiserver load balancer needs.\n")
			for _, s := range cfg.Sysctls {
				sb.WriteString(s.String() + "\n")
			}
			data := []byte(sb.String())
			files = append(files, runctx.DesiredFile{Path: lb.SysctlPath, Mode: 0o644, Data: data, Sum: runctx.Sum(data), Note: "load balancer"})
		}
	}
	return files, nil
}

// planFront compares host h's files and units with what they must be.
func (b *Group) planFront(h frontHost) (*frontPlan, error) {
	f := b.facts[h.host.Name]
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

func (b *Group) printFrontPlan() {
	var rows [][]string
	for _, h := range b.fronts {
		p := b.plans[h.host.Name]
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
		b.run.Printer.Infof("  %s", line)
	}
}
