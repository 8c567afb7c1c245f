// Package lb plans and renders the kube-apiserver load balancer: HAProxy on every LB host in front of
// the control-plane hosts, and Keepalived moving a virtual IP (VRRP) to a host whose HAProxy works.
//
// Plan turns a loaded cluster spec into a Config: typed data with everything decided (priorities,
// the check weight, peers, bind address, backends, check settings), proven to fail over
// (ProveFailover). FailoverRule is the spec validation's side of the same computation: the spec is
// refused (specload.Load) exactly when the priorities and weight Plan would configure can't fail over. RenderHAProxy and RenderKeepalived turn a Config into the files of one host, from
// templates/haproxy.cfg.tmpl and templates/keepalived.conf.tmpl, byte for byte deterministic. Nothing
// here does I/O on hosts: installing (upload, `haproxy -c`, `keepalived --config-test`, reload,
// roll back) belongs to the bootstrap phases.
//
// Design notes:
//   - HAProxy is a TCP (layer 4) proxy: TLS passes through to the apiservers untouched (clients
//     authenticate to them with their own certificates), while backends are checked at the HTTP layer
//     over TLS (GET /readyz expecting 200), so a hung or draining apiserver is taken out, not only a
//     closed port.
//   - Keepalived tracks the LOCAL HAProxy only (its loopback /healthz, http://127.0.0.1:8405): the VIP
//     must follow a working load balancer; apiserver health is HAProxy's job.
//   - Every node starts in state BACKUP; the election (priority, then the higher primary address,
//     RFC 5798 §6.4.3) picks the holder. The check weight is computed so that a node whose check
//     fails drops below every healthy node (vrrp.Weight); ProveFailover checks it for every node.
//   - No vrrp_strict: it would add iptables rules dropping traffic to the VIP (only `accept` lifts
//     that), and it refuses unicast peers and PASS authentication, which hactl supports.
package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/lb/vrrp"
)

// Remote layout on LB hosts, and the names the rendered files use.
const (
	// HAProxyConfigPath is HAProxy's configuration file (mode 0644).
	HAProxyConfigPath = "/etc/haproxy/haproxy.cfg"
	// KeepalivedConfigPath is Keepalived's configuration file; mode 0600: it may hold the VRRP secret.
	KeepalivedConfigPath = "/etc/keepalived/keepalived.conf"
	// RemoteCAFile is where spec.loadBalancer.healthCheck.caFile is installed on LB hosts (mode 0644).
	RemoteCAFile = "/etc/haproxy/kube-apiserver-ca.crt"
	// SysctlPath holds the kernel settings the load balancer needs (Config.Sysctls), when any.
	SysctlPath = "/etc/sysctl.d/90-hactl-lb.conf"
	// StatsSocket is HAProxy's runtime API (show stat, show servers state): for hactl status.
	StatsSocket = "/run/haproxy/admin.sock"
	// LocalPort is HAProxy's loopback endpoint: /metrics (Prometheus) and /healthz (Keepalived's check).
	LocalPort = limits.LBLocalPort
	// HealthPath is the loopback path Keepalived's check asks HAProxy for (HAProxy's monitor-uri).
	HealthPath = "/healthz"
	// MetricsPath is the Prometheus exporter's path on LocalPort.
	MetricsPath = "/metrics"
	// ReadyzPath is what HAProxy asks every apiserver (expecting 200).
	ReadyzPath = "/readyz"
	// FrontendName and BackendName name HAProxy's proxies (in the stats: hactl status reads them).
	FrontendName = "kube-apiserver"
	BackendName  = "kube-apiservers"
	// InstanceName is the vrrp_instance and ScriptName the vrrp_script in keepalived.conf.
	InstanceName = "hactl_apiserver"
	ScriptName   = "chk_haproxy"
)

// Keepalived's check of the local HAProxy; its fall count is Config.ScriptFall
// (spec.loadBalancer.checkFall). With weight 0 the VIP leaves a host whose HAProxy stopped after up to
// ScriptInterval x ScriptFall (the check notices), then the backup's skew time (it takes over on the
// priority-0 advertisement of FAULT): about 1.1 s measured with fall 1 (bench/lb).
const (
	ScriptInterval = 1 // seconds between checks
	ScriptTimeout  = 2 // seconds before a check that has not returned counts as failed
	ScriptRise     = 2 // passed checks before it is lifted
)

// Config is the planned load balancer: everything the templates need, decided and proven.
type Config struct {
	// Cluster is metadata.name (for comments in the files).
	Cluster string
	// VIP is the virtual IP with the prefix length of the LB hosts' network.
	VIP netip.Prefix
	// VirtualRouterID is keepalived's virtual_router_id (1-255).
	VirtualRouterID int
	// Mode is v1alpha1.LBModeUnicast or v1alpha1.LBModeMulticast.
	Mode string
	// AdvertInterval is keepalived's advert_int: whole seconds with VRRPVersion 2, hundredths of a
	// second with 3.
	AdvertInterval time.Duration
	// VRRPVersion is 2 or 3 (v1alpha1.VRRPVersion): 3 is written as vrrp_version for an IPv4 VIP.
	VRRPVersion int
	// Topology is v1alpha1.TopologyDedicated or v1alpha1.TopologyColocated.
	Topology string
	// Nopreempt renders keepalived's nopreempt (only with Weight 0).
	Nopreempt bool
	// Auth is true when VRRP PASS authentication is on: RenderKeepalived then needs the secret.
	Auth bool
	// Weight is the vrrp_script weight: negative (subtracted while the check fails), positive (added
	// while it passes) or 0 (a failed check puts the node into FAULT state, releasing the VIP).
	Weight int
	// ScriptFall is the vrrp_script fall count (spec.loadBalancer.checkFall): failed checks in a row
	// before the weight applies (or FAULT, with weight 0).
	ScriptFall int
	// FrontendPort is where clients reach HAProxy (at the VIP).
	FrontendPort int
	// Bind is HAProxy's frontend bind address: "*" (every IPv4 address) or "[::]" (every address)
	// for dedicated LB hosts, the VIP for colocated ones (see Plan).
	Bind string
	// Sysctls are kernel settings every LB host needs (colocated: non-local bind).
	Sysctls []Sysctl
	// HealthCheck is HAProxy's check of every backend.
	HealthCheck HealthCheck
	// Nodes are the LB hosts (keepalived instances), in spec order.
	Nodes []Node
	// Backends are the kube-apiservers (control-plane hosts at apiServerPort), in spec order.
	Backends []Backend
	// Notes are what a plan should tell the user (unverified checks, interfaces to detect, sysctls).
	Notes []string
}

// Node is one LB host's keepalived instance.
type Node struct {
	// Name is the host name.
	Name string
	// Address is the host's address: its unicast_src_ip, and the tie-breaker of the election.
	Address netip.Addr
	// Interface carries the VIP; "" until known: spec.loadBalancer.interface, else detected on the
	// host (InterfaceFor) and set with Config.SetInterface before RenderKeepalived.
	Interface string
	// Priority is the VRRP priority (1-254).
	Priority int
	// Peers are the other LB hosts' addresses (unicast_peer), in spec order; nil in multicast mode.
	Peers []netip.Addr
}

// Backend is one kube-apiserver.
type Backend struct {
	// Name is the control-plane host's name (HAProxy's server name).
	Name string
	// Address and Port are where its apiserver listens.
	Address netip.Addr
	Port    int
}

// AddrPort returns the backend as HAProxy writes it: "10.0.0.1:6443" or "[fd00::1]:6443".
func (b Backend) AddrPort() string { return netip.AddrPortFrom(b.Address, uint16(b.Port)).String() }

// HealthCheck is HAProxy's check of the backends: GET ReadyzPath over TLS expecting 200.
type HealthCheck struct {
	// Interval is HAProxy's inter (whole milliseconds); Fall and Rise its fall and rise counts.
	Interval time.Duration
	Fall     int
	Rise     int
	// Timeout bounds one check: the backend's "timeout connect" (TCP and TLS handshakes: HAProxy
	// counts the handshake of an SSL check as connecting) and "timeout check" (the answer). Without
	// both, a check of an apiserver that accepts connections and never answers (SIGSTOP) only times
	// out after inter. CheckTimeout(Interval).
	Timeout time.Duration
	// FastInterval is HAProxy's fastinter: the interval between checks once one has failed (and
	// until the server is DOWN), so a hung apiserver is out within EjectionBound. Equal to Timeout.
	FastInterval time.Duration
	// CAFile is the CA bundle's path ON THE LB HOSTS (RemoteCAFile), or "" for verify none.
	CAFile string
	// LocalCAFile is the local file (spec.loadBalancer.healthCheck.caFile) to install at CAFile.
	LocalCAFile string
}

// MaxCheckTimeout caps HealthCheck.Timeout: an apiserver answers /readyz in milliseconds.
const MaxCheckTimeout = time.Second

// CheckTimeout returns the timeout of one backend check for a check interval: half the interval, at
// most MaxCheckTimeout, in whole milliseconds (at least 1ms).
func CheckTimeout(interval time.Duration) time.Duration {
	return max(min(interval/2, MaxCheckTimeout).Truncate(time.Millisecond), time.Millisecond)
}

// EjectionBound is the longest a hung apiserver stays UP in HAProxy: up to Interval until the next
// check starts, Timeout for it to fail, then Fall-1 more checks FastInterval apart, each failing after
// Timeout. With Timeout = FastInterval = CheckTimeout(Interval) it is at most Interval x Fall + 1s
// (the target), e.g. 2s + 5 x 1s = 7s for the defaults (inter 2s, fall 3).
func (h HealthCheck) EjectionBound() time.Duration {
	return h.Interval + h.Timeout + time.Duration(h.Fall-1)*(h.FastInterval+h.Timeout)
}

// Sysctl is one kernel setting.
type Sysctl struct {
	Name, Value string
}

// String renders "name=value" (sysctl.d(5) syntax).
func (s Sysctl) String() string { return s.Name + "=" + s.Value }

// Plan computes the load balancer of a cluster loaded with specload.Load (defaulted and validated).
//
// Per LB host (the hosts with role lb, or the control-plane hosts when colocated), in spec order:
// the priority from spec.loadBalancer.priorities or vrrp.DefaultPriorities (150, 140, 130...), the
// host address as unicast_src_ip and every other LB host as unicast_peer (unicast mode), the
// interface from the spec ("" = to be detected). For the whole: the check weight from
// spec.loadBalancer.checkWeight or vrrp.Weight (a failed node drops below every healthy one), the
// backends (control-plane hosts at apiServerPort) and HAProxy's bind address:
//   - dedicated: "*" ("[::]" for an IPv6 VIP): HAProxy starts and passes Keepalived's check on every
//     LB host, holding the VIP or not, so a backup can take the VIP at once; binding only the VIP
//     would need non-local binding on backups and would fail HAProxy's start there without it.
//   - colocated: the VIP. kube-apiserver (and kubelet, etcd) listen on every address of these hosts,
//     so HAProxy keeps to the VIP and clients can't reach it by a node address by mistake; where the
//     VIP is not (yet) local this needs net.ipv4.ip_nonlocal_bind=1 (net.ipv6.ip_nonlocal_bind for an
//     IPv6 VIP), returned in Sysctls and Notes.
//
// The result is checked with ProveFailover. Errors name the spec field when the spec is at fault
// (Plan re-checks what the renderers rely on, so an unvalidated spec can't produce broken files).
func Plan(c *v1alpha1.Cluster) (*Config, error) {
	s := c.Spec.LoadBalancer
	switch {
	case s == nil:
		return nil, fmt.Errorf("spec.loadBalancer is not set")
	case s.External != nil:
		return nil, fmt.Errorf("spec.loadBalancer.external is set: hactl runs no load balancer to plan")
	}
	vip, err := netip.ParsePrefix(s.VIP)
	if err != nil {
		return nil, fmt.Errorf("spec.loadBalancer.vip: %w", err)
	}
	adv, version := s.AdvertInterval.Duration, v1alpha1.VRRPVersion(s)
	switch {
	case version == 2 && (adv < limits.MinAdvertInterval || adv%limits.MinAdvertInterval != 0):
		return nil, fmt.Errorf("spec.loadBalancer.advertInterval %v is not a whole number of seconds (VRRPv2)", adv)
	case version == 3 && (adv < limits.MinAdvertIntervalV3 || adv > limits.MaxAdvertIntervalV3 || adv%limits.AdvertIntervalUnitV3 != 0):
		return nil, fmt.Errorf("spec.loadBalancer.advertInterval %v is not hundredths of a second from %v to %v (VRRPv3)", adv, limits.MinAdvertIntervalV3, limits.MaxAdvertIntervalV3)
	case version == 3 && s.Auth != nil && vip.Addr().Is4():
		return nil, fmt.Errorf("spec.loadBalancer.auth: advertInterval %v runs VRRPv3, which has no authentication", adv)
	}
	cfg := &Config{
		Cluster:         c.Metadata.Name,
		VIP:             vip,
		VirtualRouterID: s.VirtualRouterID,
		Mode:            s.Mode,
		AdvertInterval:  adv,
		VRRPVersion:     version,
		Topology:        s.Topology,
		Nopreempt:       s.Nopreempt,
		Auth:            s.Auth != nil,
		ScriptFall:      s.CheckFall,
		FrontendPort:    s.FrontendPort,
		HealthCheck: HealthCheck{
			Interval:     s.HealthCheck.Interval.Duration,
			Fall:         s.HealthCheck.Fall,
			Rise:         s.HealthCheck.Rise,
			Timeout:      CheckTimeout(s.HealthCheck.Interval.Duration),
			FastInterval: CheckTimeout(s.HealthCheck.Interval.Duration),
		},
	}
	if s.HealthCheck.CAFile != "" {
		cfg.HealthCheck.CAFile, cfg.HealthCheck.LocalCAFile = RemoteCAFile, s.HealthCheck.CAFile
	} else {
		cfg.Notes = append(cfg.Notes, "HAProxy checks the apiservers' /readyz over TLS WITHOUT verifying their certificates (verify none): set spec.loadBalancer.healthCheck.caFile to the cluster CA (kubeadm's /etc/kubernetes/pki/ca.crt) to verify them")
	}

	switch s.Topology {
	case v1alpha1.TopologyDedicated:
		cfg.Bind = "*"
		if vip.Addr().Is6() {
			cfg.Bind = "[::]"
		}
	case v1alpha1.TopologyColocated:
		cfg.Bind = bracket(vip.Addr())
		sc := Sysctl{"net.ipv4.ip_nonlocal_bind", "1"}
		if vip.Addr().Is6() {
			sc.Name = "net.ipv6.ip_nonlocal_bind"
		}
		cfg.Sysctls = append(cfg.Sysctls, sc)
		cfg.Notes = append(cfg.Notes, fmt.Sprintf("colocated: HAProxy binds only the VIP (%s) on every control-plane host, also where the VIP is not: sysctl %s (in %s)", netip.AddrPortFrom(vip.Addr(), uint16(s.FrontendPort)), sc, SysctlPath))
	default:
		return nil, fmt.Errorf("spec.loadBalancer.topology %q is not supported", s.Topology)
	}

	// Backends.
	seen := map[netip.AddrPort]string{}
	for _, h := range c.ControlPlaneHosts() {
		ip, err := netip.ParseAddr(h.Address)
		if err != nil {
			return nil, fmt.Errorf("host %s: address: %w", h.Name, err)
		}
		b := Backend{Name: h.Name, Address: ip, Port: s.APIServerPort}
		ap := netip.AddrPortFrom(ip, uint16(b.Port))
		if other, dup := seen[ap]; dup {
			return nil, fmt.Errorf("duplicate backend: %s and %s are both %s", other, h.Name, ap)
		}
		seen[ap] = h.Name
		cfg.Backends = append(cfg.Backends, b)
	}
	if len(cfg.Backends) == 0 {
		return nil, fmt.Errorf("spec.loadBalancer has no backends: no host has role control-plane")
	}

	// Nodes.
	nodes, prios, err := electionNodes(c)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		cfg.Nodes = append(cfg.Nodes, Node{Name: n.Name, Address: n.Addr, Interface: s.Interface, Priority: n.Priority})
	}
	if cfg.Mode == v1alpha1.LBModeUnicast {
		for i := range cfg.Nodes {
			for j, o := range cfg.Nodes {
				if j != i {
					cfg.Nodes[i].Peers = append(cfg.Nodes[i].Peers, o.Address)
				}
			}
		}
	}
	if s.Interface == "" {
		cfg.Notes = append(cfg.Notes, fmt.Sprintf("the VIP's interface is detected on each LB host: the one whose network holds %s", vip.Masked()))
	}

	if s.CheckWeight != nil || len(prios) > 0 {
		if cfg.Weight, err = checkWeight(s, prios); err != nil {
			return nil, fmt.Errorf("spec.loadBalancer.priorities: %w", err)
		}
	}
	if err := ProveFailover(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// electionNodes returns the VRRP routers of c's load balancer: one per LB host (c.LBHosts(), in spec
// order) with its address and priority, spec.loadBalancer.priorities[host] or, when the spec sets no
// priorities, vrrp.DefaultPriorities (150, 140, 130...); prios are the priorities in the same order.
// Errors name the host whose address doesn't parse or that the priorities leave out.
func electionNodes(c *v1alpha1.Cluster) (nodes []vrrp.Node, prios []int, err error) {
	s := c.Spec.LoadBalancer
	hosts := c.LBHosts()
	if len(s.Priorities) > 0 {
		for _, h := range hosts {
			p, ok := s.Priorities[h.Name]
			if !ok {
				return nil, nil, fmt.Errorf("spec.loadBalancer.priorities has no priority for LB host %s", h.Name)
			}
			prios = append(prios, p)
		}
	} else {
		prios = vrrp.DefaultPriorities(len(hosts))
	}
	for i, h := range hosts {
		ip, err := netip.ParseAddr(h.Address)
		if err != nil {
			return nil, nil, fmt.Errorf("host %s: address: %w", h.Name, err)
		}
		nodes = append(nodes, vrrp.Node{Name: h.Name, Addr: ip, Priority: prios[i]})
	}
	return nodes, prios, nil
}

// checkWeight returns the vrrp_script weight of the load balancer: spec.loadBalancer.checkWeight
// when set, else vrrp.Weight of prios (a failed node drops below every healthy one), whose error says
// why no weight can do that.
func checkWeight(s *v1alpha1.LoadBalancer, prios []int) (int, error) {
	if s.CheckWeight != nil {
		return *s.CheckWeight, nil
	}
	return vrrp.Weight(prios)
}

// FailoverRule is the spec's failover rule (a v1alpha1.FailoverRule; specload passes it to
// v1alpha1.Validate and Decode): it computes the election Plan configures, the priorities of the LB
// hosts and the check weight (electionNodes, checkWeight), and proves it with vrrp.ProveFailover: a
// host whose HAProxy check fails never keeps the VIP while another host's check passes (RFC 5798
// §6.4.3 elections, keepalived's vrrp_script weights).
//
// It returns nil when the VIP fails over (and when c has no load balancer), else a field.Invalid at
// the field the user wrote: spec.loadBalancer.checkWeight (value: the weight) when it is set, else
// spec.loadBalancer.priorities when they are set, else spec.loadBalancer (value: the computed
// priorities, "name=priority, ..."). Its message is vrrp.ProveFailover's, or "no check weight can
// move the VIP away from a failed host: " and vrrp.Weight's reason. v1alpha1.Validate runs it only
// once the rules it relies on hold (a known topology, at least 2 LB hosts with IP addresses,
// priorities in range, distinct and for every LB host or none, checkWeight in range, nopreempt only
// with weight 0); a spec breaking them, which Validate reports on its own, gives nil here.
func FailoverRule(c *v1alpha1.Cluster) *field.Error {
	s := c.ManagedLB()
	if s == nil {
		return nil
	}
	nodes, prios, err := electionNodes(c)
	if err != nil {
		return nil // reported by Validate on the priorities or the host
	}
	p := field.NewPath("spec", "loadBalancer")
	at, value := p, any(vrrp.Describe(nodes))
	if len(s.Priorities) > 0 {
		at = p.Child("priorities")
	}
	if s.CheckWeight != nil {
		at, value = p.Child("checkWeight"), *s.CheckWeight
	}
	weight, err := checkWeight(s, prios)
	if err != nil {
		return field.Invalid(at, value, "no check weight can move the VIP away from a failed host: "+err.Error())
	}
	if err := vrrp.ProveFailover(nodes, weight); err != nil {
		return field.Invalid(at, value, err.Error())
	}
	return nil
}

// ProveFailover checks what the rendered keepalived.conf files rely on: at least 2 nodes with
// distinct priorities, nopreempt only with weight 0, in unicast mode every node's peers exactly the
// other nodes (never empty: keepalived without peers would fall back to multicast), and
// vrrp.ProveFailover: when a node's HAProxy check fails, it never keeps the VIP while another node's
// check passes (effective priority = priority - |weight| for a negative weight, bounded to 1..254;
// ties go to the higher address, RFC 5798 §6.4.3). Errors name the priorities and the weight.
func ProveFailover(cfg *Config) error {
	nodes := make([]vrrp.Node, len(cfg.Nodes))
	byPrio := map[int]string{}
	for i, n := range cfg.Nodes {
		if other, dup := byPrio[n.Priority]; dup {
			return fmt.Errorf("%s and %s have the same priority %d: the holder would depend on their addresses; give every LB host its own priority", other, n.Name, n.Priority)
		}
		byPrio[n.Priority] = n.Name
		nodes[i] = vrrp.Node{Name: n.Name, Addr: n.Address, Priority: n.Priority}
	}
	if cfg.Nopreempt && cfg.Weight != 0 {
		return fmt.Errorf("nopreempt with check weight %d would keep the VIP on a host whose HAProxy failed: use weight 0 with nopreempt", cfg.Weight)
	}
	if cfg.Mode == v1alpha1.LBModeUnicast {
		for i, n := range cfg.Nodes {
			var want []netip.Addr
			for j, o := range cfg.Nodes {
				if j != i {
					want = append(want, o.Address)
				}
			}
			if len(n.Peers) == 0 || !slices.Equal(n.Peers, want) {
				return fmt.Errorf("unicast peers of %s are %v, want every other LB host %v", n.Name, n.Peers, want)
			}
		}
	}
	return vrrp.ProveFailover(nodes, cfg.Weight)
}

// Node returns the node named host, or nil.
func (cfg *Config) Node(host string) *Node {
	for i := range cfg.Nodes {
		if cfg.Nodes[i].Name == host {
			return &cfg.Nodes[i]
		}
	}
	return nil
}

// SetInterface records the interface carrying the VIP on host (detected with InterfaceFor). It
// returns an error for an unknown host or an invalid interface name.
func (cfg *Config) SetInterface(host, iface string) error {
	n := cfg.Node(host)
	if n == nil {
		return fmt.Errorf("%s is not an LB host", host)
	}
	if !validInterface(iface) {
		return fmt.Errorf("interface %q of %s is not a valid interface name", iface, host)
	}
	n.Interface = iface
	return nil
}

// validInterface: a Linux interface name keepalived.conf can hold without quoting (see
// v1alpha1's interface rule, ifNameRE).
func validInterface(s string) bool {
	if s == "" || len(s) > 15 || s[0] == '-' || s[0] == '.' || s[0] == '_' {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	})
}

// bracket writes an address as HAProxy's bind takes it: IPv6 in brackets.
func bracket(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}
