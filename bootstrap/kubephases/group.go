// Package kubephases is the Kubernetes phase group of `hactl bootstrap`: it turns the control-plane
// and worker hosts of spec.kubernetes into a kubeadm cluster on hactl's etcd and VIP. Phases:
// kube/preflight (checks on the nodes' facts) → kube/plan (after etcd's and the load balancer's
// plans) → kube/binaries (kubelet, kubeadm, kubectl verified — sha256 and version — before anything
// is installed on any host) → … etcd and the load balancer … → kube/runtime (containerd, kernel
// settings) → kube/kubelet (unit and kubeadm drop-in) → kube/images (archives imported) → kube/init
// (the first control plane) → kube/join (other control planes one at a time, then workers in
// parallel) → kube/cni (bridge network and routes) → kube/wait (every node Ready through the VIP,
// every static pod running).
//
// Converge, don't redo: a node with hactl's marker (kubenode.MarkerPath) has joined, and a re-run
// runs no kubeadm command on it; a node with kubeadm's files but no marker had its join interrupted
// and is `kubeadm reset` (its /etc/kubernetes saved aside first) before it joins again; a joined
// node whose kubelet is stopped gets it started. Join credentials (a bootstrap token, a certificate
// key) are made fresh by every run that joins a node, and travel only in 0600 files.
package kubephases

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/specload"
)

// Phase titles: the identity the bootstrap orders the group's phases by (phase.List).
const (
	PhasePreflight = "kube/preflight"
	PhasePlan      = "kube/plan"
	PhaseBinaries  = "kube/binaries"
	PhaseRuntime   = "kube/runtime"
	PhaseKubelet   = "kube/kubelet"
	PhaseImages    = "kube/images"
	PhaseInit      = "kube/init"
	PhaseJoin      = "kube/join"
	PhaseCNI       = "kube/cni"
	PhaseWait      = "kube/wait"
)

// Preflight check names (for --ignore-preflight-errors), hactl's own; kubeadm's are
// spec.kubernetes.ignorePreflightErrors.
const (
	CheckSwap       = "kube-swap"
	CheckNetfilter  = "kube-br-netfilter"
	CheckIPForward  = "kube-ip-forward"
	CheckKubePorts  = "kube-ports"
	CheckKubeArch   = "kube-arch"
	CheckPkgManager = "kube-packages"
	CheckResolvConf = "kube-resolv-conf"
)

// Checks lists the group's preflight checks.
var Checks = []string{CheckSwap, CheckNetfilter, CheckIPForward, CheckKubePorts, CheckKubeArch, CheckPkgManager, CheckResolvConf}

// Options configure the group.
type Options struct {
	// IgnorePreflightErrors names checks (Checks) whose failures become warnings; "all" ignores all.
	IgnorePreflightErrors []string
	// WaitTimeout bounds kube/wait (default DefaultWaitTimeout).
	WaitTimeout time.Duration
	// SumCache keeps the local binaries' sha256 between runs (nil: hashed every run).
	SumCache *sumcache.Cache
}

// DefaultWaitTimeout is Options.WaitTimeout's default: node registration, image-less static pods
// and the CNI on a fresh cluster.
const DefaultWaitTimeout = 5 * time.Minute

// node is one Kubernetes node: a control-plane or worker host.
type node struct {
	host v1alpha1.Host
	addr netip.Addr
	peer netip.Addr // privateAddress, else addr: kubelet's node IP, the pod routes' next hop
	cp   bool
}

func (n node) role() string {
	if n.cp {
		return "control-plane"
	}
	return "worker"
}

// Group is the Kubernetes phases' state for one run, and what several phases share (the nodes and
// their plans, the kubeadm command, the background package installs and image imports, a node's
// network after its join). A step only one phase takes is a method of that phase (Plan.planNode,
// Join.joinNode, CNI.podCIDRsFromAPI, ...); the join credentials are their own type (credentials).
type Group struct {
	run   *runctx.Run
	opt   Options
	nodes []node

	mu    sync.Mutex
	facts map[string]*nodeFacts
	plans map[string]*nodePlan

	kubelet  map[string]any // the user's KubeletConfiguration (nil: none)
	params   kubeadm.NodeParams
	endpoint string                  // the API endpoint every node uses (VIP:port)
	images   map[string][]string     // image → local archives holding it
	sums     map[string]string       // local binary path → sha256
	creds    credentials             // this run's join credentials (kube/init, kube/join)
	source   string                  // a joined control-plane host: runs the kubectl and token commands
	joined   map[string]bool         // nodes joined (marker) after this run's kube/init and kube/join
	changed  bool                    // some node changed in this run (kube/wait runs)
	podCIDRs map[string]netip.Prefix // nodes' pod ranges learned in this run (kube/init, kube/join)
	imports  map[string]*pendingImport
	packages map[string]*pendingImport // runtime packages installing in the background
	network  sync.WaitGroup            // nodes' networks written after their join, in the background
	written  map[string][]byte         // bridge networks written in this run
}

// OwnedUnits are the Kubernetes nodes' units hactl manages, with the files hactl and kubeadm write
// for them: kubelet's unit and kubeadm's drop-in (hactl's, or where Kubernetes' packages put it),
// kubeadm's kubeadm-flags.env; the package's containerd unit (configured through config.toml); the
// pod-routes unit. /etc/default/kubelet (KUBELET_EXTRA_ARGS) is the user's: any value there
// overrides the spec.
var OwnedUnits = []provision.OwnedUnitFiles{
	{Unit: "kubelet.service", Fragment: kubenode.KubeletUnitPath,
		DropIns:  []string{kubenode.KubeadmDropInPath, "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", "/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"},
		EnvFiles: []string{"/var/lib/kubelet/kubeadm-flags.env"}},
	{Unit: "containerd.service"},
	{Unit: kubenode.RoutesUnit, Fragment: kubenode.RoutesUnitPath},
}

// New prepares the group and registers the facts it needs from every node with run. It contacts
// nothing. Without spec.kubernetes the group has no phases to run. Errors: the kubelet
// configuration file cannot be read (specload.ReadKubeletConfiguration).
func New(run *runctx.Run, opt Options) (*Group, error) {
	if opt.WaitTimeout == 0 {
		opt.WaitTimeout = DefaultWaitTimeout
	}
	kubelet, err := specload.ReadKubeletConfiguration(run.Spec)
	if err != nil {
		return nil, fmt.Errorf("spec.kubernetes.kubeletConfigurationFile: %w", err)
	}
	g := &Group{run: run, opt: opt, kubelet: kubelet, facts: map[string]*nodeFacts{}, plans: map[string]*nodePlan{}, joined: map[string]bool{},
		podCIDRs: map[string]netip.Prefix{}, imports: map[string]*pendingImport{}, packages: map[string]*pendingImport{}, written: map[string][]byte{}}
	for _, h := range run.Spec.KubeNodes() {
		a, _ := netip.ParseAddr(h.Address) // validated by specload.Load
		peer, _ := netip.ParseAddr(h.PeerAddress())
		n := node{host: h, addr: a, peer: peer, cp: h.HasRole(v1alpha1.RoleControlPlane)}
		g.nodes = append(g.nodes, n)
		run.Need(h, factsRequest(n, g.resolvConf()))
		run.Manage(h, OwnedUnits...)
	}
	return g, nil
}

// Phases returns the group's phases in their order (bootstrap interleaves them with the others').
func (g *Group) Phases() phase.List {
	return phase.List{&Preflight{g}, &Plan{g}, &Binaries{g}, &Runtime{g}, &Kubelet{g}, &Images{g}, &Init{g}, &Join{g}, &CNI{g}, &Wait{g}}
}

// active: the spec has Kubernetes nodes.
func (g *Group) active() bool { return len(g.nodes) > 0 }

// planned: kube/plan ran for every node.
func (g *Group) planned() bool { return g.active() && len(g.plans) == len(g.nodes) }

func (g *Group) forEach(ctx context.Context, nodes []node, fn func(ctx context.Context, n node) error) error {
	return provision.ForEach(ctx, nodes, g.run.Spec.Spec.SSH.MaxParallel, func(n node) string { return n.host.Name }, fn)
}

func (g *Group) plan(name string) *nodePlan {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.plans[name]
}

func (g *Group) ignored(check string) bool {
	for _, c := range g.opt.IgnorePreflightErrors {
		if c == check || c == "all" {
			return true
		}
	}
	return false
}

// Report returns every node's outcome, in spec order: what changed (the plan's words), and its
// Kubernetes role.
func (g *Group) Report() []report.Host {
	var out []report.Host
	for _, n := range g.nodes {
		hr := report.Host{Name: n.host.Name, Zone: n.host.Zone, Address: n.addr.String(), Action: "unchanged", Commands: g.run.Commands(n.host.Name)}
		for _, r := range n.host.Roles {
			hr.Roles = append(hr.Roles, string(r))
		}
		if p := g.plan(n.host.Name); p != nil {
			hr.Changes = p.describe()
		}
		if len(hr.Changes) > 0 {
			hr.Action = "changed"
		}
		out = append(out, hr)
	}
	return out
}

// Endpoint returns the API endpoint the nodes use ("" before kube/plan).
func (g *Group) Endpoint() string { return g.endpoint }

// cps returns the control-plane nodes, in spec order.
func (g *Group) cps() []node {
	var out []node
	for _, n := range g.nodes {
		if n.cp {
			out = append(out, n)
		}
	}
	return out
}

// nodeNamed returns the node of host name (the zero node when none is).
func (g *Group) nodeNamed(name string) node {
	for _, n := range g.nodes {
		if n.host.Name == name {
			return n
		}
	}
	return node{}
}

func joinWords(ws []string) string {
	if len(ws) == 0 {
		return "unchanged"
	}
	return strings.Join(ws, ", ")
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// stepf formats an error of step on node n.
func stepf(n node, step, format string, args ...any) error {
	return fmt.Errorf("host %s: step %s: %s", n.host.Name, step, fmt.Sprintf(format, args...))
}

// resolvConf is the user's KubeletConfiguration resolvConf ("" when unset).
func (g *Group) resolvConf() string {
	s, _ := g.kubelet["resolvConf"].(string)
	return s
}
