package v1alpha1

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/lb/vrrp"
)

// Limits and reserved values of spec.loadBalancer.
const (
	// LBLocalPort is the loopback port of HAProxy's local endpoint on every LB host
	// (http://127.0.0.1:8405: /metrics for Prometheus, /healthz for keepalived's check of the local
	// HAProxy); frontendPort must differ from it.
	LBLocalPort = 8405
	// MaxVRRPSecretLength is the longest VRRP PASS secret: VRRPv2's authentication data is 8 bytes
	// (RFC 2338 §5.3.10), and keepalived silently cuts longer secrets ("Truncating auth_pass").
	MaxVRRPSecretLength = 8
	// MaxAdvertIntervalV4 bounds advertInterval for an IPv4 VIP: VRRPv2's advertisement interval is
	// an 8-bit count of seconds (RFC 3768 §5.3.7).
	MaxAdvertIntervalV4 = 255 * time.Second
	// MaxAdvertIntervalV6 bounds advertInterval for an IPv6 VIP: keepalived runs VRRPv3 for IPv6,
	// whose interval is a 12-bit count of centiseconds (RFC 5798 §5.2.7: at most 40.95 s); hactl uses
	// whole seconds.
	MaxAdvertIntervalV6 = 40 * time.Second
	// MaxVirtualRouterID is the largest VRRP virtual router ID (an 8-bit field; 0 is not valid).
	MaxVirtualRouterID = 255
)

var (
	lbModes    = []string{LBModeUnicast, LBModeMulticast}
	topologies = []string{TopologyDedicated, TopologyColocated}
	// ifNameRE: a Linux interface name (IFNAMSIZ 16 with the NUL, so at most 15 bytes; no '/', ':'
	// or white space); hactl also keeps it to characters that need no quoting in keepalived.conf.
	ifNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)
)

// loadBalancer checks spec.loadBalancer (defaulted) against the hosts. Sources: VRRP limits from RFC
// 3768 (VRRPv2, IPv4) and RFC 5798 (VRRPv3, IPv6); keepalived.conf(5) for weights and the auth
// secret; the failover rule is vrrp.ProveFailover's.
func (v *validator) loadBalancer(c *Cluster, p *field.Path) {
	lb := c.Spec.LoadBalancer
	if lb == nil {
		return
	}
	hosts := c.Spec.Hosts
	hp := field.NewPath("spec", "hosts")
	addrOf := func(i int) (netip.Addr, bool) {
		ip, err := netip.ParseAddr(hosts[i].Address)
		return ip, err == nil && ip.Zone() == ""
	}
	provable := true // false once a problem makes the failover proof meaningless

	// Enumerations.
	topoOK := slices.Contains(topologies, lb.Topology)
	if !topoOK {
		v.add(field.NotSupported(p.Child("topology"), lb.Topology, topologies))
		provable = false
	}
	if !slices.Contains(lbModes, lb.Mode) {
		v.add(field.NotSupported(p.Child("mode"), lb.Mode, lbModes))
	}

	// Backends: the control-plane hosts at apiServerPort.
	var cps []int
	for i, h := range hosts {
		if h.HasRole(RoleControlPlane) {
			cps = append(cps, i)
		}
	}
	if len(hosts) > 0 && len(cps) == 0 {
		v.add(field.Required(hp, "spec.loadBalancer has no backends: no host has role control-plane; give role control-plane to the hosts that run kube-apiserver"))
	}
	seenBackend := map[netip.AddrPort]int{}
	for _, i := range cps {
		ip, ok := addrOf(i)
		if !ok {
			continue
		}
		ap := netip.AddrPortFrom(ip, uint16(lb.APIServerPort))
		if j, dup := seenBackend[ap]; dup {
			v.add(field.Invalid(hp.Index(i), hosts[i].Name, fmt.Sprintf("duplicate backend: %s (%s) and %s (%s) are both %s; HAProxy would check and balance one apiserver twice: give every control-plane host its own address",
				hosts[j].Name, hp.Index(j), hosts[i].Name, hp.Index(i), ap)))
			continue
		}
		seenBackend[ap] = i
	}

	// LB hosts.
	var lbs []int
	if topoOK {
		for i, h := range hosts {
			switch {
			case lb.Topology == TopologyColocated && h.HasRole(RoleControlPlane):
				lbs = append(lbs, i)
			case lb.Topology == TopologyDedicated && h.HasRole(RoleLB):
				lbs = append(lbs, i)
			case lb.Topology == TopologyColocated && h.HasRole(RoleLB):
				v.warn(hp.Index(i).Child("roles"), "role lb is not used: spec.loadBalancer.topology is colocated, so HAProxy and Keepalived run on the control-plane hosts")
			}
		}
		switch {
		case len(hosts) == 0:
		case lb.Topology == TopologyDedicated && len(lbs) == 0:
			v.add(field.Invalid(p.Child("topology"), lb.Topology, "no host has role lb: give role lb to at least 2 hosts on the VIP's network (they run HAProxy and Keepalived), or set topology: colocated to run them on the control-plane hosts"))
			provable = false
		case len(lbs) == 0:
			provable = false // no control-plane hosts: reported above
		case len(lbs) == 1 && lb.Mode == LBModeUnicast:
			v.add(field.Invalid(p.Child("mode"), lb.Mode, fmt.Sprintf("unicast needs at least 2 LB hosts, there is one (%s): its unicast_peer list would be empty and the VIP could never move; add a host (%s)",
				hosts[lbs[0]].Name, lbHostHint(lb.Topology))))
			provable = false
		case len(lbs) == 1:
			v.add(field.Invalid(p.Child("topology"), lb.Topology, fmt.Sprintf("only one LB host (%s): the VIP has nowhere to move when it fails; add a host (%s)", hosts[lbs[0]].Name, lbHostHint(lb.Topology))))
			provable = false
		}
	}

	// VIP.
	vp := p.Child("vip")
	vip, vipOK := v.vip(vp, lb.VIP)
	if vipOK {
		for i := range hosts {
			if ip, ok := addrOf(i); ok && ip == vip.Addr() {
				v.add(field.Invalid(vp, lb.VIP, fmt.Sprintf("is the address of host %s (%s): the VIP must be a free address on the LB hosts' network, which Keepalived moves between them", hosts[i].Name, hp.Index(i))))
				vipOK = false
			}
		}
	}
	if vipOK && len(lbs) > 0 {
		var outside []string
		for _, i := range lbs {
			if ip, ok := addrOf(i); ok && !vip.Contains(ip) {
				outside = append(outside, fmt.Sprintf("%s (%s)", hosts[i].Name, ip))
			}
		}
		if len(outside) > 0 {
			v.add(field.Invalid(vp, lb.VIP, fmt.Sprintf("is outside the network of LB host(s) %s: the VIP's prefix %s must hold every LB host's address (VRRP works on one network segment: the VIP is added to the interface that carries that network, and peers reach each other there); use a free address of the LB hosts' network with its prefix length, e.g. %s",
				strings.Join(outside, ", "), vip.Masked(), exampleVIP(hosts[lbs[0]].Address, vip))))
		}
	}

	// Interface, router ID, advertisements.
	if lb.Interface != "" && !ifNameRE.MatchString(lb.Interface) {
		v.add(field.Invalid(p.Child("interface"), lb.Interface, "must be a network interface name (1-15 letters, digits, '_', '.' or '-'), e.g. eth0, or \"\" to detect it on each host from the VIP's network"))
	}
	if lb.VirtualRouterID < 1 || lb.VirtualRouterID > MaxVirtualRouterID {
		v.add(field.Invalid(p.Child("virtualRouterID"), lb.VirtualRouterID, fmt.Sprintf("must be between 1 and %d (VRRP's virtual router ID), unique among the VRRP routers on the network, e.g. %d", MaxVirtualRouterID, DefaultVirtualRouterID)))
	}
	maxAdv, vrrpVersion := MaxAdvertIntervalV4, "VRRPv2 (IPv4)"
	if vipOK && vip.Addr().Is6() {
		maxAdv, vrrpVersion = MaxAdvertIntervalV6, "VRRPv3 (IPv6)"
	}
	adv := lb.AdvertInterval.Duration
	ap := p.Child("advertInterval")
	switch {
	case adv <= 0 || adv%time.Second != 0:
		v.add(field.Invalid(ap, adv.String(), "must be a whole number of seconds (keepalived's advert_int), e.g. 1s"))
	case adv > maxAdv:
		v.add(field.Invalid(ap, adv.String(), fmt.Sprintf("must be at most %ds for %s; the VIP moves about 3 intervals after its holder dies, so 1s (the default) is the usual choice", int(maxAdv/time.Second), vrrpVersion)))
	}

	// Authentication.
	if a := lb.Auth; a != nil {
		authP := p.Child("auth")
		switch {
		case a.File != "" && a.Env != "":
			v.add(field.Forbidden(authP.Child("env"), "auth.file is set too: set exactly one of file (a local file holding the secret) and env (the name of an environment variable holding it)"))
		case a.File == "" && a.Env == "":
			v.add(field.Required(authP, "set file (a local file holding the VRRP secret, mode 0600) or env (the name of an environment variable holding it), or remove auth to run VRRP without authentication"))
		}
		v.envName(authP.Child("env"), a.Env, "HACTL_VRRP_PASSWORD", "VRRP auth secret")
		if a.File != "" && (looksLikeSecret(a.File) || strings.ContainsAny(a.File, "\n\r")) {
			v.add(field.Invalid(authP.Child("file"), "(value not shown)", "must be the path of a local file holding the secret, not the secret itself"))
		}
		if vipOK && vip.Addr().Is6() {
			v.add(field.Forbidden(authP, "an IPv6 VIP runs VRRPv3, which has no authentication (RFC 5798 removed it; keepalived ignores it): remove auth"))
		}
	}

	// Ports.
	fp, aps := p.Child("frontendPort"), p.Child("apiServerPort")
	v.port(fp, lb.FrontendPort, "HAProxy's frontend port")
	v.port(aps, lb.APIServerPort, "the kube-apiserver port")
	switch {
	case lb.FrontendPort == LBLocalPort:
		v.add(field.Invalid(fp, lb.FrontendPort, fmt.Sprintf("port %d is reserved: HAProxy serves its local metrics and health endpoint on 127.0.0.1:%d; pick another port, e.g. %d", LBLocalPort, LBLocalPort, DefaultFrontendPort)))
	case lb.Topology == TopologyColocated && lb.FrontendPort == lb.APIServerPort:
		v.add(field.Invalid(fp, lb.FrontendPort, fmt.Sprintf("must differ from apiServerPort (%d) with topology colocated: HAProxy and kube-apiserver run on the same hosts and can't both listen on port %d; use e.g. frontendPort: 8443 (clients then use the VIP on 8443)", lb.APIServerPort, lb.FrontendPort)))
	default:
		if i, what := portClash(c, lbs, lb.FrontendPort); what != "" {
			v.add(field.Invalid(fp, lb.FrontendPort, fmt.Sprintf("host %s runs HAProxy and %s on the same port %d; pick another frontendPort", hosts[i].Name, what, lb.FrontendPort)))
		}
	}
	if lb.Topology == TopologyColocated && lb.APIServerPort == LBLocalPort {
		v.add(field.Invalid(aps, lb.APIServerPort, fmt.Sprintf("port %d is HAProxy's local endpoint on the control-plane hosts with topology colocated; use the apiserver's port, e.g. %d", LBLocalPort, DefaultAPIServerPort)))
	}

	// HAProxy's backend checks.
	hcp := p.Child("healthCheck")
	hc := lb.HealthCheck
	if d := hc.Interval.Duration; d <= 0 || d%time.Millisecond != 0 {
		v.add(field.Invalid(hcp.Child("interval"), d.String(), "must be a positive whole number of milliseconds (HAProxy's inter), e.g. 2s"))
	}
	if hc.Fall < 1 {
		v.add(field.Invalid(hcp.Child("fall"), hc.Fall, "must be at least 1 (failed checks before an apiserver is taken out), e.g. 3"))
	}
	if hc.Rise < 1 {
		v.add(field.Invalid(hcp.Child("rise"), hc.Rise, "must be at least 1 (passed checks before an apiserver is used again), e.g. 2"))
	}
	if looksLikeSecret(hc.CAFile) || strings.ContainsAny(hc.CAFile, "\n\r") {
		v.add(field.Invalid(hcp.Child("caFile"), "(value not shown)", "must be the path of a local CA certificate file (PEM), not its contents"))
	}

	// Priorities and the check weight: the VIP must leave a host whose HAProxy fails.
	pp := p.Child("priorities")
	wp := p.Child("checkWeight")
	var prios []int
	if len(lb.Priorities) > 0 {
		byPrio := map[int]string{}
		isLB := map[string]bool{}
		var names []string
		for _, i := range lbs {
			isLB[hosts[i].Name] = true
			names = append(names, hosts[i].Name)
		}
		for _, name := range slices.Sorted(maps.Keys(lb.Priorities)) {
			prio := lb.Priorities[name]
			kp := pp.Key(name)
			switch {
			case topoOK && !isLB[name]:
				v.add(field.Invalid(kp, prio, fmt.Sprintf("%q is not an LB host (LB hosts: %s): set priorities only for hosts running Keepalived", name, orNone(names))))
				provable = false
			case prio < vrrp.MinPriority || prio > vrrp.MaxPriority:
				v.add(field.Invalid(kp, prio, fmt.Sprintf("must be between %d and %d (255 is reserved for the VIP's owner, which hactl never configures), e.g. %d", vrrp.MinPriority, vrrp.MaxPriority, vrrp.TopPriority)))
				provable = false
			case byPrio[prio] != "":
				v.add(field.Invalid(kp, prio, fmt.Sprintf("the same priority as %s: give every LB host its own priority, so which host holds the VIP does not depend on addresses", byPrio[prio])))
				provable = false
			default:
				byPrio[prio] = name
			}
		}
		var missing []string
		for _, name := range names {
			if _, ok := lb.Priorities[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			v.add(field.Invalid(pp, describeMap(lb.Priorities), fmt.Sprintf("no priority for LB host(s) %s: set one for every LB host, or remove priorities to have them computed from host order", strings.Join(missing, ", "))))
			provable = false
		}
		for _, i := range lbs {
			prios = append(prios, lb.Priorities[hosts[i].Name])
		}
	} else {
		prios = vrrp.DefaultPriorities(len(lbs))
	}
	if w := lb.CheckWeight; w != nil && (*w < -vrrp.MaxWeight || *w > vrrp.MaxWeight) {
		v.add(field.Invalid(wp, *w, fmt.Sprintf("must be between %d and %d (keepalived's vrrp_script weight), or 0 to release the VIP on a failed check, or left out to have it computed", -vrrp.MaxWeight, vrrp.MaxWeight)))
		provable = false
	}
	if lb.Nopreempt && (lb.CheckWeight == nil || *lb.CheckWeight != 0) {
		what := "the computed check weight"
		if lb.CheckWeight != nil {
			what = fmt.Sprintf("checkWeight %d", *lb.CheckWeight)
		}
		v.add(field.Invalid(p.Child("nopreempt"), true, fmt.Sprintf("nopreempt with %s would keep the VIP on a host whose HAProxy failed: the check only lowers that host's priority, and without preemption no other host takes the VIP from it; set checkWeight: 0 (a failed check puts the host into FAULT state, which releases the VIP) or remove nopreempt", what)))
		provable = false
	}
	if !provable || len(lbs) < 2 {
		return
	}
	nodes := make([]vrrp.Node, len(lbs))
	for k, i := range lbs {
		ip, ok := addrOf(i)
		if !ok {
			return // reported on the host
		}
		nodes[k] = vrrp.Node{Name: hosts[i].Name, Addr: ip, Priority: prios[k]}
	}
	// Point at what the user wrote: the weight, else the priorities (defaults always fail over).
	at, value := p, any(describePriorities(nodes))
	if len(lb.Priorities) > 0 {
		at = pp
	}
	var weight int
	if lb.CheckWeight != nil {
		weight, at, value = *lb.CheckWeight, wp, *lb.CheckWeight
	} else if w, err := vrrp.Weight(prios); err != nil {
		v.add(field.Invalid(at, value, "no check weight can move the VIP away from a failed host: "+err.Error()))
		return
	} else {
		weight = w
	}
	if err := vrrp.ProveFailover(nodes, weight); err != nil {
		v.add(field.Invalid(at, value, err.Error()))
	}
}

// vip parses spec.loadBalancer.vip and reports what is wrong with it.
func (v *validator) vip(p *field.Path, s string) (netip.Prefix, bool) {
	if s == "" {
		v.add(field.Required(p, "set the virtual IP with the prefix length of the LB hosts' network, e.g. 10.0.1.100/24"))
		return netip.Prefix{}, false
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" {
			bits := 24
			if ip.Is6() {
				bits = 64
			}
			v.add(field.Invalid(p, s, fmt.Sprintf("has no prefix length: write the VIP with the prefix length of the LB hosts' network (Keepalived adds it to the interface with it), e.g. %s/%d", s, bits)))
		} else if strings.Contains(s, "%") {
			v.add(field.Invalid(p, s, "an IPv6 zone index can't be part of the VIP: write an address with the prefix length of the LB hosts' network (CIDR notation), e.g. fd00:db8::100/64"))
		} else {
			v.add(field.Invalid(p, s, "must be an IP address with the prefix length of the LB hosts' network (CIDR notation), e.g. 10.0.1.100/24 or fd00:db8::100/64"))
		}
		return netip.Prefix{}, false
	}
	ip := pfx.Addr()
	switch {
	case ip.Is4In6():
		v.add(field.Invalid(p, s, "write an IPv4 VIP as IPv4, e.g. 10.0.1.100/24"))
	case ip.IsUnspecified(), ip.IsLoopback(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		v.add(field.Invalid(p, s, "must be a unicast address of the LB hosts' network, e.g. 10.0.1.100/24"))
	case ip.IsLinkLocalUnicast():
		v.add(field.Invalid(p, s, "a link-local address can't be a VIP clients reach: use an address of the LB hosts' network"))
	case ip.Is4() && pfx.Bits() <= 30 && ip == pfx.Masked().Addr():
		v.add(field.Invalid(p, s, fmt.Sprintf("is the network address of %s: use a free host address of that network", pfx.Masked())))
	case ip.Is4() && pfx.Bits() <= 30 && ip == lastAddr(pfx):
		v.add(field.Invalid(p, s, fmt.Sprintf("is the broadcast address of %s: use a free host address of that network", pfx.Masked())))
	default:
		return pfx, true
	}
	return netip.Prefix{}, false
}

// lastAddr is the highest address of an IPv4 prefix (its broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	n := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) | host
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// exampleVIP suggests a VIP in hostAddr's network with vip's prefix length (or /24, /64 when that
// prefix can't hold the host).
func exampleVIP(hostAddr string, vip netip.Prefix) string {
	ip, err := netip.ParseAddr(hostAddr)
	if err != nil {
		return "10.0.1.100/24"
	}
	bits := vip.Bits()
	if ip.BitLen() != vip.Addr().BitLen() || bits > ip.BitLen()-2 {
		bits = 24
		if ip.Is6() {
			bits = 64
		}
	}
	net := netip.PrefixFrom(ip, bits).Masked()
	if ip.Is4() {
		a := net.Addr().As4()
		a[3] |= 100
		return netip.PrefixFrom(netip.AddrFrom4(a), bits).String()
	}
	a := net.Addr().As16()
	a[14], a[15] = 0x01, 0x00 // ...::100
	return netip.PrefixFrom(netip.AddrFrom16(a), bits).String()
}

func lbHostHint(topology string) string {
	if topology == TopologyColocated {
		return "role control-plane"
	}
	return "role lb"
}

// portClash names what else listens on port on one of the LB hosts (by index), or "".
func portClash(c *Cluster, lbs []int, port int) (int, string) {
	lb, e := c.Spec.LoadBalancer, c.Spec.Etcd
	for _, i := range lbs {
		h := c.Spec.Hosts[i]
		switch {
		case h.HasRole(RoleControlPlane) && port == lb.APIServerPort:
			return i, "kube-apiserver (apiServerPort)"
		case h.HasRole(RoleEtcd) && port == e.ClientPort:
			return i, "etcd (spec.etcd.clientPort)"
		case h.HasRole(RoleEtcd) && port == e.PeerPort:
			return i, "etcd (spec.etcd.peerPort)"
		case h.HasRole(RoleEtcd) && port == MetricsPort:
			return i, "etcd's metrics endpoint"
		}
	}
	return 0, ""
}

func describePriorities(nodes []vrrp.Node) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s=%d", n.Name, n.Priority)
	}
	return strings.Join(parts, ", ")
}

// describeMap renders priorities as "name=priority, ..." sorted by name.
func describeMap(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// vrrpSecretChars are the characters a VRRP secret may hold besides letters and digits: none of them
// is white space, a quote, a comment start ('#', '!'), a block brace, a backslash or keepalived's
// '$' (parameter substitution), so the secret is one plain word in keepalived.conf.
const vrrpSecretChars = "-_.+=:,/@%^*~"

// VRRPSecretProblem says what is wrong with a VRRP PASS secret ("" when nothing). The message never
// quotes the secret.
func VRRPSecretProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxVRRPSecretLength:
		return fmt.Sprintf("is %d characters long: the auth secret must be at most %d characters (keepalived uses only the first %d and silently drops the rest, so a longer secret gives a false sense of strength and two clusters differing after character %d would accept each other); use a secret of at most %d characters",
			len(s), MaxVRRPSecretLength, MaxVRRPSecretLength, MaxVRRPSecretLength, MaxVRRPSecretLength)
	case strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(vrrpSecretChars, r))
	}):
		return "contains a character other than letters, digits and " + strings.Join(strings.Split(vrrpSecretChars, ""), " ") + " (white space, quotes, '#', '!', '$', braces and backslashes would break keepalived.conf)"
	}
	return ""
}

// maxSecretFileBytes bounds how much of an auth secret file is read.
const maxSecretFileBytes = 4096

// ReadVRRPSecret returns the VRRP PASS secret spec.loadBalancer.auth names: the content of auth.file
// (one trailing newline removed) or the value of the environment variable auth.env (getenv is
// os.Getenv in production). It returns "" and no error when the spec has no load balancer or no auth,
// and an error naming the field (never the secret) when the secret can't be read or breaks
// VRRPSecretProblem's rules.
func ReadVRRPSecret(c *Cluster, getenv func(string) string) (string, error) {
	lb := c.Spec.LoadBalancer
	if lb == nil || lb.Auth == nil {
		return "", nil
	}
	ap := field.NewPath("spec", "loadBalancer", "auth")
	var s string
	switch a := lb.Auth; {
	case a.File != "" && a.Env != "":
		return "", fmt.Errorf("%s: set exactly one of file and env", ap)
	case a.File != "":
		secret, msg := readSecretFile(a.File)
		if msg != "" {
			return "", fmt.Errorf("%s: %s: %s", ap.Child("file"), a.File, msg)
		}
		s = secret
		if msg := VRRPSecretProblem(s); msg != "" {
			return "", fmt.Errorf("%s: the auth secret in %s %s", ap.Child("file"), a.File, msg)
		}
	case a.Env != "":
		s = getenv(a.Env)
		if s == "" {
			return "", fmt.Errorf("%s: names the environment variable %s, which is not set (or is empty)", ap.Child("env"), a.Env)
		}
		if msg := VRRPSecretProblem(s); msg != "" {
			return "", fmt.Errorf("%s: the auth secret in %s %s", ap.Child("env"), a.Env, msg)
		}
	default:
		return "", fmt.Errorf("%s: set file or env", ap)
	}
	return s, nil
}

// readSecretFile reads an auth secret file: a regular file, not readable by group or others, at
// most maxSecretFileBytes; one trailing newline ("\n" or "\r\n") is removed. It returns the secret or
// a message saying what is wrong (never quoting the content).
func readSecretFile(name string) (string, string) {
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		return "", fileProblem(err, "the auth secret file")
	case !fi.Mode().IsRegular():
		return "", "is not a regular file; point it at a file holding the VRRP auth secret"
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Sprintf("has mode %04o: a secret file must not be accessible by group or others; run: chmod 600 %s", fi.Mode().Perm(), shellQuote(name))
	}
	f, err := os.Open(name)
	if err != nil {
		return "", fileProblem(err, "the auth secret file")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	switch {
	case err != nil:
		return "", fileProblem(err, "the auth secret file")
	case len(data) > maxSecretFileBytes:
		return "", fmt.Sprintf("is larger than %d bytes, which no VRRP secret is: point it at the file holding the secret (at most %d characters)", maxSecretFileBytes, MaxVRRPSecretLength)
	}
	s := string(data)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, ""
}

// checkCAFile says what is wrong with a local CA bundle ("" when nothing): it must be a readable
// regular file of PEM certificates, at least one of them a CA.
func checkCAFile(name string) string {
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		return fileProblem(err, "the CA file")
	case !fi.Mode().IsRegular():
		return "is not a regular file; point it at the CA certificate (PEM) that signed the apiservers' certificates, e.g. a copy of kubeadm's /etc/kubernetes/pki/ca.crt"
	}
	f, err := os.Open(name)
	if err != nil {
		return fileProblem(err, "the CA file")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyBytes+1))
	if err != nil {
		return fileProblem(err, "the CA file")
	}
	if len(data) > maxKeyBytes {
		return fmt.Sprintf("is larger than %d bytes, which no CA bundle is", maxKeyBytes)
	}
	var certs, cas int
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			return "holds a private key: point it at the CA certificate only (HAProxy needs no key to verify the apiservers)"
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Sprintf("holds a certificate that can't be parsed: %v", err)
		}
		certs++
		if cert.IsCA {
			cas++
		}
	}
	switch {
	case certs == 0:
		return "holds no PEM certificate: point it at the CA certificate that signed the apiservers' certificates, e.g. a copy of kubeadm's /etc/kubernetes/pki/ca.crt"
	case cas == 0:
		return "holds no CA certificate (none has the CA flag): point it at the CA that signed the apiservers' certificates, not at a serving certificate"
	}
	return ""
}

// validateLBLocalFiles is ValidateLocalFiles' part for spec.loadBalancer.
func validateLBLocalFiles(c *Cluster) field.ErrorList {
	lb := c.Spec.LoadBalancer
	if lb == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "loadBalancer")
	if f := lb.HealthCheck.CAFile; f != "" {
		if msg := checkCAFile(f); msg != "" {
			errs = append(errs, field.Invalid(p.Child("healthCheck", "caFile"), f, msg))
		}
	}
	if a := lb.Auth; a != nil && a.File != "" {
		fp := p.Child("auth", "file")
		if s, msg := readSecretFile(a.File); msg != "" {
			errs = append(errs, field.Invalid(fp, a.File, msg))
		} else if msg := VRRPSecretProblem(s); msg != "" {
			errs = append(errs, field.Invalid(fp, a.File, "the auth secret in this file "+msg))
		}
	}
	return errs
}

// validateLBEnvironment is ValidateEnvironment's part for spec.loadBalancer.
func validateLBEnvironment(c *Cluster, getenv func(string) string) field.ErrorList {
	lb := c.Spec.LoadBalancer
	if lb == nil || lb.Auth == nil || lb.Auth.Env == "" || !isEnvName(lb.Auth.Env) {
		return nil
	}
	name := lb.Auth.Env
	p := field.NewPath("spec", "loadBalancer", "auth", "env")
	s := getenv(name)
	if s == "" {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("names the environment variable %s, which is not set (or is empty): export %s=... (the VRRP auth secret, at most %d characters) before running hactl, or remove spec.loadBalancer.auth to run VRRP without authentication", name, name, MaxVRRPSecretLength))}
	}
	if msg := VRRPSecretProblem(s); msg != "" {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("the auth secret in %s %s", name, msg))}
	}
	return nil
}
