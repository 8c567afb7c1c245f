package kubephases

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/limits"
	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// PreflightError is one failed check on one node.
type PreflightError struct {
	Host, Check, Msg string
}

func (e *PreflightError) Error() string {
	return fmt.Sprintf("preflight check %q failed: %s (skip with --ignore-preflight-errors=%s if you know why)", e.Check, e.Msg, e.Check)
}

// Preflight checks every node's facts (gathered by preflight, runctx.Run.Connect): systemd, swap,
// bridge netfilter, IPv4 forwarding, the Kubernetes ports on nodes that have not joined yet, the
// architecture of the local binaries, a package manager for missing runtime packages, and (with
// CoreDNS) that the resolver file kubelet hands CoreDNS names a resolver outside the node.
type Preflight struct{ g *Group }

// Title is PhasePreflight.
func (*Preflight) Title() string { return PhasePreflight }

// ShouldRun: the spec has Kubernetes nodes.
func (ph *Preflight) ShouldRun() bool { return ph.g.active() }

// Run does the phase's work. Errors are aggregated per host.
func (ph *Preflight) Run(ctx context.Context) error {
	g := ph.g
	byName := map[string]node{}
	for _, n := range g.nodes {
		byName[n.host.Name] = n
	}
	k := g.run.Spec.Spec.Kubernetes
	archs := map[string]string{} // local binary → uname -m
	for _, p := range []string{k.Binaries.Kubelet, k.Binaries.Kubeadm, k.Binaries.Kubectl} {
		if p != "" {
			a, err := provision.BinaryArch(p)
			if err != nil {
				return fmt.Errorf("spec.kubernetes.binaries: %w", err)
			}
			archs[p] = a
		}
	}
	swapOK := g.kubelet["failSwapOn"] == false
	return g.run.Connect(ctx, func(ctx context.Context, host string) error {
		n, ok := byName[host]
		if !ok {
			return nil
		}
		f := factsFrom(g.run.Facts(host), g.resolvConf())
		g.mu.Lock()
		g.facts[host] = f
		g.mu.Unlock()
		var errs *multierror.Error
		fail := func(check, format string, args ...any) {
			e := &PreflightError{Host: host, Check: check, Msg: fmt.Sprintf(format, args...)}
			if g.ignored(check) {
				g.run.Printer.Warnf("%s: %s (ignored)", host, e.Error())
				return
			}
			errs = multierror.Append(errs, e)
		}
		if !f.Systemd {
			errs = multierror.Append(errs, &PreflightError{Host: host, Check: "systemd", Msg: "systemd is not running as init: kubelet and containerd run as systemd units"})
		}
		if f.Swap > 0 && !swapOK {
			fail(CheckSwap, "%d swap area(s) active: kubelet refuses to start with swap (failSwapOn); run swapoff -a and remove swap from /etc/fstab, or set failSwapOn: false in spec.kubernetes.kubeletConfigurationFile", f.Swap)
		}
		if f.BridgeNF == "missing" && !f.Have["modprobe"] {
			fail(CheckNetfilter, "/proc/sys/net/bridge is missing and there is no modprobe to load br_netfilter: load the module (modprobe br_netfilter)")
		} else if f.BridgeNF == "0" && !f.ProcSysRW {
			fail(CheckNetfilter, "net.bridge.bridge-nf-call-iptables is 0 and /proc/sys is read-only: Services would not work for pods on the bridge")
		}
		if f.IPForward != "1" && !f.ProcSysRW {
			fail(CheckIPForward, "net.ipv4.ip_forward is %q and /proc/sys is read-only: pods and Services need forwarding", f.IPForward)
		}
		if !f.joined() {
			ports := []int{limits.KubeletPort}
			if n.cp {
				ports = append(ports, g.run.Spec.APIServerPort(), limits.KubeControllerManagerPort, limits.KubeSchedulerPort)
			}
			var busy []string
			for _, p := range ports {
				if f.Listen[p] {
					busy = append(busy, fmt.Sprint(p))
				}
			}
			if len(busy) > 0 {
				fail(CheckKubePorts, "port(s) %s already in use on a node that has not joined yet: another Kubernetes or service runs there", strings.Join(busy, ", "))
			}
		}
		for p, a := range archs {
			if a != "" && f.Arch != "" && a != f.Arch {
				fail(CheckKubeArch, "%s is built for %s, the host is %s", p, a, f.Arch)
			}
		}
		var missing []string
		for _, c := range kubenode.RuntimeCommands {
			if !f.Have[c] {
				missing = append(missing, c)
			}
		}
		if k.CNI == v1alpha1.CNIBridge && f.CNIBin == "" {
			missing = append(missing, "cni")
		}
		if len(missing) > 0 && f.PkgManager == "" {
			fail(CheckPkgManager, "%s missing and no package manager (apt-get, dnf, yum): install them by hand", strings.Join(missing, ", "))
		}
		if k.CoreDNSEnabled() {
			if f.ResolvConfData == nil {
				fail(CheckResolvConf, "%s, the resolver file kubelet gives CoreDNS, is missing", f.ResolvConf)
			} else if lo := loopbackResolvers(f.ResolvConfData); lo != nil {
				fail(CheckResolvConf, "%s names only loopback resolvers (%s): CoreDNS forwards to them from its pod and reaches itself, then stops (its loop plugin); "+
					"set resolvConf to a file with the upstream resolvers in spec.kubernetes.kubeletConfigurationFile (hosts with systemd-resolved: /run/systemd/resolve/resolv.conf)",
					f.ResolvConf, strings.Join(lo, ", "))
			}
		}
		if errs != nil {
			return errs.ErrorOrNil()
		}
		state := "new node"
		switch {
		case f.joined():
			state = "joined"
		case len(f.leftovers()) > 0:
			state = "interrupted join (kubeadm files, no hactl marker): will be reset and joined again"
		}
		cg := "cgroup v1"
		if f.CgroupV2 {
			cg = "cgroup v2"
		}
		g.run.Printer.Hostf(host, "%s, %s, containerd %s, kubelet %s: %s", orDash(f.OS), cg, orDash(f.ContainerdVersion), orDash(f.Kubelet.Active), state)
		return nil
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// artifact is one binary to install on a node.
type artifact struct {
	name  string
	local string             // local file (spec.kubernetes.binaries), or
	dl    *v1alpha1.Download // a download
	sum   string             // the sha256 it must have
}

// nodePlan is what will happen on one node.
type nodePlan struct {
	binaries          []artifact
	packages          []string
	files             []runctx.DesiredFile
	daemonReload      bool
	restartContainerd bool
	startContainerd   bool
	enableKubelet     bool
	kubelet           string   // "start" | "restart" | "" (kubeadm starts it on new nodes)
	archives          []string // local archives to import
	missingImages     []string
	kubeadm           string // "init" | "join" | "" (joined)
	reset             []string
	cni               bool // the bridge network or routes change (kube/cni decides)
}

func (p *nodePlan) describe() []string {
	var out []string
	for _, a := range p.binaries {
		out = append(out, "install "+a.name)
	}
	for _, pkg := range p.packages {
		out = append(out, "install "+pkg)
	}
	var files []string
	for _, f := range p.files {
		files = append(files, "write "+f.Path)
	}
	sort.Strings(files)
	out = append(out, files...)
	if p.restartContainerd {
		out = append(out, "restart containerd")
	} else if p.startContainerd {
		out = append(out, "start containerd")
	}
	if len(p.archives) > 0 {
		out = append(out, fmt.Sprintf("import %d image(s)", len(p.missingImages)))
	}
	if len(p.reset) > 0 {
		out = append(out, "kubeadm reset")
	}
	if p.kubeadm != "" {
		out = append(out, "kubeadm "+p.kubeadm)
	}
	if p.kubelet != "" {
		out = append(out, p.kubelet+" kubelet")
	}
	if p.cni {
		out = append(out, "pod network")
	}
	return out
}

func (p *nodePlan) changes() bool { return len(p.describe()) > 0 }

// Plan decides, for every node, what to install and which kubeadm command to run; it prints the
// plan and changes nothing. The cgroup driver comes from the spec or the hosts' cgroup version;
// restrict_oom_score_adj from their capability bounding set.
type Plan struct{ g *Group }

// Title is PhasePlan.
func (*Plan) Title() string { return PhasePlan }

// ShouldRun: kube/preflight ran for every node.
func (ph *Plan) ShouldRun() bool { return ph.g.active() && len(ph.g.facts) == len(ph.g.nodes) }

// Run does the phase's work. Errors: hosts of both cgroup versions without
// spec.kubernetes.runtime.cgroupDriver; a local binary or archive that cannot be read.
func (ph *Plan) Run(ctx context.Context) error {
	g := ph.g
	spec := g.run.Spec
	k := spec.Spec.Kubernetes
	var err error
	if g.endpoint, err = kubeadm.Endpoint(spec); err != nil {
		return err
	}
	// The cgroup driver: the spec's, or the hosts' cgroup version's.
	v1, v2 := 0, 0
	for _, n := range g.nodes {
		if g.facts[n.host.Name].CgroupV2 {
			v2++
		} else {
			v1++
		}
	}
	driver := k.Runtime.CgroupDriver
	if driver == "" {
		switch {
		case v1 > 0 && v2 > 0:
			return errors.New("spec.kubernetes.runtime.cgroupDriver: the nodes run both cgroup v1 and v2; set the driver (systemd or cgroupfs) for all of them")
		case v2 > 0:
			driver = v1alpha1.CgroupDriverSystemd
		default:
			driver = v1alpha1.CgroupDriverCgroupfs
		}
	}
	g.params = kubeadm.NodeParams{CgroupDriver: driver, CgroupV1: v1 > 0, ImagePullPolicy: "IfNotPresent", Kubelet: g.kubelet}
	if len(k.ImageArchives) > 0 {
		g.params.ImagePullPolicy = "Never"
		g.images = map[string][]string{}
		for _, a := range k.ImageArchives {
			refs, err := images.ArchiveImages(a)
			if err != nil {
				return fmt.Errorf("spec.kubernetes.imageArchives: %w", err)
			}
			for _, r := range refs {
				g.images[r] = append(g.images[r], a)
			}
		}
	}
	g.sums = map[string]string{}
	for _, p := range []string{k.Binaries.Kubelet, k.Binaries.Kubeadm, k.Binaries.Kubectl} {
		if p == "" {
			continue
		}
		if g.sums[p], err = localSum(g.opt, p); err != nil {
			return fmt.Errorf("spec.kubernetes.binaries: %w", err)
		}
	}
	// The node that answers kubectl and makes tokens: the first joined control plane.
	g.source = ""
	for _, n := range g.cps() {
		if g.facts[n.host.Name].joined() {
			g.source = n.host.Name
			break
		}
	}
	var errs *multierror.Error
	for _, n := range g.nodes {
		p, err := ph.planNode(n)
		if err != nil {
			errs = multierror.Append(errs, &provision.HostError{Host: n.host.Name, Err: err})
			continue
		}
		g.plans[n.host.Name] = p
	}
	if errs != nil {
		return errs.ErrorOrNil()
	}
	if g.source == "" {
		first := g.cps()[0].host.Name
		g.plans[first].kubeadm = "init"
	}
	ph.printPlan(driver)
	return nil
}

// localSum is the sha256 of a local file (through the cache when there is one).
func localSum(o Options, path string) (string, error) {
	if o.SumCache != nil {
		return o.SumCache.Sum(path)
	}
	return sumcache.New("").Sum(path) // a cache that keeps nothing: the file is hashed
}

// wantedImages are the images of the archives (refs, sorted) node n needs: every image on control
// planes; on workers all but the control-plane components (kube-proxy, pause, CoreDNS and the
// user's own images stay).
func wantedImages(refs []string, cp bool) []string {
	all := refs
	if cp {
		return all
	}
	var out []string
	for _, img := range all {
		if !strings.Contains(img, "/kube-apiserver:") && !strings.Contains(img, "/kube-controller-manager:") && !strings.Contains(img, "/kube-scheduler:") {
			out = append(out, img)
		}
	}
	return out
}

// planNode compares node n's facts with what it must have.
func (ph *Plan) planNode(n node) (*nodePlan, error) {
	g := ph.g
	spec := g.run.Spec
	k := spec.Spec.Kubernetes
	f := g.facts[n.host.Name]
	p := &nodePlan{}
	// Binaries.
	for _, b := range kubenode.Binaries {
		if !n.cp && !b.Worker {
			continue
		}
		a := artifact{name: b.Name}
		switch b.Name {
		case "kubelet":
			a.local, a.dl = k.Binaries.Kubelet, k.Download.Kubelet
		case "kubeadm":
			a.local, a.dl = k.Binaries.Kubeadm, k.Download.Kubeadm
		case "kubectl":
			a.local, a.dl = k.Binaries.Kubectl, k.Download.Kubectl
		}
		if a.dl != nil {
			a.sum = a.dl.SHA256
		} else {
			a.sum = g.sums[a.local]
		}
		if f.Sums[binPath(b.Name)] != a.sum {
			p.binaries = append(p.binaries, a)
		}
	}
	// Packages.
	var missing []string
	for _, c := range kubenode.RuntimeCommands {
		if !f.Have[c] && c != "ctr" { // ctr comes with containerd
			missing = append(missing, c)
		}
	}
	if k.CNI == v1alpha1.CNIBridge && f.CNIBin == "" {
		missing = append(missing, "cni")
	}
	p.packages = kubenode.Packages(f.PkgManager, missing)
	// Files.
	cniBin := f.CNIBin
	if cniBin == "" {
		cniBin = defaultCNIBin(f.PkgManager)
	}
	ctdVersion := f.ContainerdVersion
	if ctdVersion == "" {
		ctdVersion = packagedContainerd(f)
	}
	ctd := kubenode.ContainerdConfig(kubenode.Containerd{Version: ctdVersion, SystemdCgroup: g.params.CgroupDriver == v1alpha1.CgroupDriverSystemd,
		SandboxImage: k.PauseImage(), RestrictOOMScoreAdj: !f.CapSysResource, CNIBinDir: cniBin})
	want := []runctx.DesiredFile{
		{Path: kubenode.KubeletUnitPath, Mode: 0o644, Data: []byte(kubenode.KubeletUnit), Note: "unit"},
		{Path: kubenode.KubeadmDropInPath, Mode: 0o644, Data: []byte(kubenode.KubeadmDropIn), Note: "unit"},
		{Path: kubenode.ContainerdConfigPath, Mode: 0o644, Data: ctd, Note: "containerd"},
		{Path: kubenode.SysctlPath, Mode: 0o644, Data: []byte(kubenode.Sysctls), Note: "kernel"},
		{Path: kubenode.ModulesPath, Mode: 0o644, Data: []byte(kubenode.Modules), Note: "kernel"},
	}
	for i := range want {
		want[i].Sum = runctx.Sum(want[i].Data)
		if f.Sums[want[i].Path] != want[i].Sum {
			p.files = append(p.files, want[i])
			switch want[i].Note {
			case "unit":
				p.daemonReload = true
			case "containerd":
				p.restartContainerd = true
			}
		}
	}
	if !p.restartContainerd && (f.Containerd.Active != "active" || f.Containerd.Enabled != "enabled") {
		p.startContainerd = true
	}
	if f.Kubelet.Enabled != "enabled" {
		p.enableKubelet = true
	}
	// Images.
	if g.images != nil {
		refs := make([]string, 0, len(g.images))
		for r := range g.images {
			refs = append(refs, r)
		}
		sort.Strings(refs)
		for _, img := range wantedImages(refs, n.cp) {
			if f.Images[img] {
				continue
			}
			p.missingImages = append(p.missingImages, img)
			if arcs := g.images[img]; len(arcs) > 0 && !slices.Contains(p.archives, arcs[0]) {
				p.archives = append(p.archives, arcs[0])
			}
		}
	}
	// kubeadm.
	if !f.joined() {
		p.kubeadm = "join"
		p.reset = f.leftovers()
	} else {
		switch {
		case p.kubeletBinaryChanged() || p.daemonReload:
			p.kubelet = "restart"
		case f.Kubelet.Active != "active":
			p.kubelet = "start"
		}
	}
	return p, nil
}

func (p *nodePlan) kubeletBinaryChanged() bool {
	return slices.ContainsFunc(p.binaries, func(a artifact) bool { return a.name == "kubelet" })
}

// defaultCNIBin is where the package manager's CNI plugins land (Debian: /usr/lib/cni; RPM
// distributions: /usr/libexec/cni).
func defaultCNIBin(pm string) string {
	switch pm {
	case "apt-get":
		return "/usr/lib/cni"
	case "dnf", "yum":
		return "/usr/libexec/cni"
	}
	return "/opt/cni/bin"
}

// packagedContainerd is the containerd version to render for when containerd is not installed
// yet: the distributions' packages are 1.x (configuration version 2); kube/runtime renders again
// when the installed version says otherwise.
func packagedContainerd(*nodeFacts) string { return "1.6" }

// printPlan prints the plan: the cluster's line (cgroup driver driver), then a row per node.
func (ph *Plan) printPlan(driver string) {
	g := ph.g
	var rows [][]string
	for _, n := range g.nodes {
		rows = append(rows, []string{n.host.Name, n.host.Zone, n.role(), joinWords(g.plans[n.host.Name].describe())})
	}
	var sb strings.Builder
	k := g.run.Spec.Spec.Kubernetes
	fmt.Fprintf(&sb, "kubernetes %s through %s: cgroup driver %s, pods %s, services %s, cni %s", k.Version, g.endpoint, driver, k.PodSubnet, k.ServiceSubnet, k.CNI)
	if len(k.ImageArchives) > 0 {
		fmt.Fprintf(&sb, ", images from %d archive(s)", len(k.ImageArchives))
	}
	sb.WriteString("\n")
	ui.Table(&sb, []string{"HOST", "ZONE", "ROLE", "CHANGES"}, rows)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		g.run.Printer.Infof("  %s", line)
	}
}
