package v1alpha1

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
)

func lbModes() []string    { return []string{LBModeUnicast, LBModeMulticast} }
func topologies() []string { return []string{TopologyDedicated, TopologyColocated} }

// ifNameRE: a Linux interface name (IFNAMSIZ 16 with the NUL, so at most 15 bytes; no '/', ':' or
// white space); hactl also keeps it to characters that need no quoting in keepalived.conf.
var ifNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)

// loadBalancer checks spec.loadBalancer (defaulted) against the hosts. Sources: VRRP limits from RFC
// 3768 (VRRPv2, IPv4) and RFC 5798 (VRRPv3, IPv6), keepalived.conf(5) for weights and the auth
// secret, all in api/limits; the failover proof is v.failover's (lb.FailoverRule), run once every
// rule it relies on holds.
func (v *validator) loadBalancer(c *Cluster, p *field.Path) {
	lb := c.Spec.LoadBalancer
	if lb == nil {
		return
	}
	if lb.External != nil {
		v.externalLB(c, p)
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
	topoOK := slices.Contains(topologies(), lb.Topology)
	if !topoOK {
		v.add(field.NotSupported(p.Child("topology"), lb.Topology, topologies()))
		provable = false
	}
	if !slices.Contains(lbModes(), lb.Mode) {
		v.add(field.NotSupported(p.Child("mode"), lb.Mode, lbModes()))
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
	vip, vipErr := parseVIP(vp, lb.VIP)
	v.add(vipErr)
	vipOK := vipErr == nil
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
	if lb.VirtualRouterID < limits.MinVirtualRouterID || lb.VirtualRouterID > limits.MaxVirtualRouterID {
		v.add(field.Invalid(p.Child("virtualRouterID"), lb.VirtualRouterID, fmt.Sprintf("must be between %d and %d (VRRP's virtual router ID), unique among the VRRP routers on the network, e.g. %d",
			limits.MinVirtualRouterID, limits.MaxVirtualRouterID, DefaultVirtualRouterID)))
	}
	adv := lb.AdvertInterval.Duration
	ap := p.Child("advertInterval")
	ipv6 := vipOK && vip.Addr().Is6()
	switch v3 := VRRPVersion(lb) == 3; {
	case adv <= 0 || (!v3 && adv < limits.MinAdvertInterval):
		v.add(field.Invalid(ap, adv.String(), fmt.Sprintf("must be whole seconds (VRRPv2), or hundredths of a second from %v (VRRPv3), e.g. %v (the default) or %v", limits.MinAdvertIntervalV3, DefaultAdvertInterval, DefaultAdvertIntervalAuth)))
	case !v3 && adv > limits.MaxAdvertIntervalV4:
		v.add(field.Invalid(ap, adv.String(), fmt.Sprintf("must be at most %ds for VRRPv2 (IPv4); the VIP moves about 3 intervals after its holder dies, so %v (the default with auth) is the usual choice", int(limits.MaxAdvertIntervalV4/time.Second), DefaultAdvertIntervalAuth)))
	case !v3:
	case adv < limits.MinAdvertIntervalV3 || adv%limits.AdvertIntervalUnitV3 != 0:
		v.add(field.Invalid(ap, adv.String(), fmt.Sprintf("must be whole seconds (VRRPv2), or hundredths of a second from %v (VRRPv3), e.g. %v (the default) or %v", limits.MinAdvertIntervalV3, DefaultAdvertInterval, DefaultAdvertIntervalAuth)))
	case adv > limits.MaxAdvertIntervalV3:
		vrrp := "VRRPv3 (an interval that is not whole seconds)"
		if ipv6 {
			vrrp = "VRRPv3 (IPv6)"
		}
		v.add(field.Invalid(ap, adv.String(), fmt.Sprintf("must be at most %v for %s; the VIP moves about 3 intervals after its holder dies, so %v (the default) is the usual choice", limits.MaxAdvertIntervalV3, vrrp, DefaultAdvertInterval)))
	case lb.Auth != nil && !ipv6:
		v.add(field.Forbidden(p.Child("auth"), fmt.Sprintf("advertInterval %v is not whole seconds, which runs VRRPv3, and VRRPv3 has no authentication (RFC 5798 removed it): remove auth, or use whole seconds (VRRPv2)", adv)))
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
		v.add(checkEnvName(authP.Child("env"), a.Env, "HACTL_VRRP_PASSWORD", "VRRP auth secret"))
		if a.File != "" && (looksLikeSecret(a.File) || strings.ContainsAny(a.File, "\n\r")) {
			v.add(field.Invalid(authP.Child("file"), "(value not shown)", "must be the path of a local file holding the secret, not the secret itself"))
		}
		if vipOK && vip.Addr().Is6() {
			v.add(field.Forbidden(authP, "an IPv6 VIP runs VRRPv3, which has no authentication (RFC 5798 removed it; keepalived ignores it): remove auth"))
		}
	}

	// Ports.
	fp, aps := p.Child("frontendPort"), p.Child("apiServerPort")
	v.add(checkPort(fp, lb.FrontendPort, "HAProxy's frontend port"),
		checkPort(aps, lb.APIServerPort, "the kube-apiserver port"))
	switch {
	case lb.FrontendPort == limits.LBLocalPort:
		v.add(field.Invalid(fp, lb.FrontendPort, fmt.Sprintf("port %d is reserved: HAProxy serves its local metrics and health endpoint on 127.0.0.1:%d; pick another port, e.g. %d", limits.LBLocalPort, limits.LBLocalPort, DefaultFrontendPort)))
	case lb.Topology == TopologyColocated && lb.FrontendPort == lb.APIServerPort:
		v.add(field.Invalid(fp, lb.FrontendPort, fmt.Sprintf("must differ from apiServerPort (%d) with topology colocated: HAProxy and kube-apiserver run on the same hosts and can't both listen on port %d; use e.g. frontendPort: 8443 (clients then use the VIP on 8443)", lb.APIServerPort, lb.FrontendPort)))
	default:
		if i, what := portClash(c, lbs, lb.FrontendPort); what != "" {
			v.add(field.Invalid(fp, lb.FrontendPort, fmt.Sprintf("host %s runs HAProxy and %s on the same port %d; pick another frontendPort", hosts[i].Name, what, lb.FrontendPort)))
		}
	}
	if lb.Topology == TopologyColocated && lb.APIServerPort == limits.LBLocalPort {
		v.add(field.Invalid(aps, lb.APIServerPort, fmt.Sprintf("port %d is HAProxy's local endpoint on the control-plane hosts with topology colocated; use the apiserver's port, e.g. %d", limits.LBLocalPort, DefaultAPIServerPort)))
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

	// Priorities and the check weight: in range and consistent; the failover proof comes last.
	pp := p.Child("priorities")
	wp := p.Child("checkWeight")
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
			case prio < limits.MinVRRPPriority || prio > limits.MaxVRRPPriority:
				v.add(field.Invalid(kp, prio, fmt.Sprintf("must be between %d and %d (%d is reserved for the VIP's owner, which hactl never configures), e.g. %d",
					limits.MinVRRPPriority, limits.MaxVRRPPriority, limits.OwnerVRRPPriority, limits.DefaultTopVRRPPriority)))
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
	}
	if w := lb.CheckWeight; w != nil && (*w < -limits.MaxCheckWeight || *w > limits.MaxCheckWeight) {
		v.add(field.Invalid(wp, *w, fmt.Sprintf("must be between %d and %d (keepalived's vrrp_script weight), or 0 to release the VIP on a failed check, or left out to have it computed", -limits.MaxCheckWeight, limits.MaxCheckWeight)))
		provable = false
	}
	if lb.CheckFall < 0 || lb.CheckFall > limits.MaxCheckFall {
		v.add(field.Invalid(p.Child("checkFall"), lb.CheckFall, fmt.Sprintf("must be between 1 and %d (failed checks of the local HAProxy, one a second, before the VIP leaves the host), e.g. 1; remove the field for the default (%d)", limits.MaxCheckFall, DefaultCheckFall)))
	}
	if lb.Nopreempt && (lb.CheckWeight == nil || *lb.CheckWeight != 0) {
		what := "the computed check weight"
		if lb.CheckWeight != nil {
			what = fmt.Sprintf("checkWeight %d", *lb.CheckWeight)
		}
		v.add(field.Invalid(p.Child("nopreempt"), true, fmt.Sprintf("nopreempt with %s would keep the VIP on a host whose HAProxy failed: the check only lowers that host's priority, and without preemption no other host takes the VIP from it; set checkWeight: 0 (a failed check puts the host into FAULT state, which releases the VIP) or remove nopreempt", what)))
		provable = false
	}
	if !provable || len(lbs) < 2 || v.failover == nil {
		return
	}
	for _, i := range lbs {
		if _, ok := addrOf(i); !ok {
			return // reported on the host
		}
	}
	if e := v.failover(c); e != nil {
		v.add(e)
	}
}

// parseVIP parses spec.loadBalancer.vip s at p: an address with the prefix length of the LB hosts'
// network, unicast, not link-local, and for IPv4 neither the network's nor its broadcast address.
// It returns the prefix and nil, or the zero prefix and a Required (s empty) or Invalid error at p.
func parseVIP(p *field.Path, s string) (netip.Prefix, *field.Error) {
	if s == "" {
		return netip.Prefix{}, field.Required(p, "set the virtual IP with the prefix length of the LB hosts' network, e.g. 10.0.1.100/24, or set external (address, port) to use a load balancer you run instead of hactl's")
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" {
			bits := 24
			if ip.Is6() {
				bits = 64
			}
			return netip.Prefix{}, field.Invalid(p, s, fmt.Sprintf("has no prefix length: write the VIP with the prefix length of the LB hosts' network (Keepalived adds it to the interface with it), e.g. %s/%d", s, bits))
		}
		if strings.Contains(s, "%") {
			return netip.Prefix{}, field.Invalid(p, s, "an IPv6 zone index can't be part of the VIP: write an address with the prefix length of the LB hosts' network (CIDR notation), e.g. fd00:db8::100/64")
		}
		return netip.Prefix{}, field.Invalid(p, s, "must be an IP address with the prefix length of the LB hosts' network (CIDR notation), e.g. 10.0.1.100/24 or fd00:db8::100/64")
	}
	ip := pfx.Addr()
	switch {
	case ip.Is4In6():
		return netip.Prefix{}, field.Invalid(p, s, "write an IPv4 VIP as IPv4, e.g. 10.0.1.100/24")
	case ip.IsUnspecified(), ip.IsLoopback(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return netip.Prefix{}, field.Invalid(p, s, "must be a unicast address of the LB hosts' network, e.g. 10.0.1.100/24")
	case ip.IsLinkLocalUnicast():
		return netip.Prefix{}, field.Invalid(p, s, "a link-local address can't be a VIP clients reach: use an address of the LB hosts' network")
	case ip.Is4() && pfx.Bits() <= 30 && ip == pfx.Masked().Addr():
		return netip.Prefix{}, field.Invalid(p, s, fmt.Sprintf("is the network address of %s: use a free host address of that network", pfx.Masked()))
	case ip.Is4() && pfx.Bits() <= 30 && ip == lastAddr(pfx):
		return netip.Prefix{}, field.Invalid(p, s, fmt.Sprintf("is the broadcast address of %s: use a free host address of that network", pfx.Masked()))
	}
	return pfx, nil
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

// managedOnly names the fields of spec.loadBalancer that configure hactl's HAProxy or Keepalived and
// that the document set (SetDefaults fills none of them beside external): with external they would
// be silently ignored.
func managedOnly(lb *LoadBalancer) []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"vip", lb.VIP != ""}, {"interface", lb.Interface != ""}, {"virtualRouterID", lb.VirtualRouterID != 0},
		{"mode", lb.Mode != ""}, {"advertInterval", lb.AdvertInterval.Duration != 0}, {"auth", lb.Auth != nil},
		{"priorities", len(lb.Priorities) > 0}, {"nopreempt", lb.Nopreempt}, {"checkWeight", lb.CheckWeight != nil},
		{"checkFall", lb.CheckFall != 0}, {"topology", lb.Topology != ""}, {"frontendPort", lb.FrontendPort != 0},
		{"healthCheck.interval", lb.HealthCheck.Interval.Duration != 0}, {"healthCheck.fall", lb.HealthCheck.Fall != 0},
		{"healthCheck.rise", lb.HealthCheck.Rise != 0},
	} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}

// externalLB checks spec.loadBalancer with external set (defaulted): no field of hactl's HAProxy or
// Keepalived beside it, an address that is an IP literal or a DNS name (as spec.ssh.bastion's), a
// port, the control-plane hosts as its backends, and no host with role lb (hactl installs nothing
// there).
func (v *validator) externalLB(c *Cluster, p *field.Path) {
	lb, ext := c.Spec.LoadBalancer, c.Spec.LoadBalancer.External
	ep := p.Child("external")
	for _, name := range managedOnly(lb) {
		fp := p
		for _, part := range strings.Split(name, ".") {
			fp = fp.Child(part)
		}
		what := "hactl's Keepalived (VRRP)"
		switch name {
		case "frontendPort", "healthCheck.interval", "healthCheck.fall", "healthCheck.rise":
			what = "hactl's HAProxy"
		case "topology":
			what = "where hactl runs HAProxy and Keepalived"
		}
		v.add(field.Forbidden(fp, fmt.Sprintf("configures %s, and with external set hactl installs no HAProxy or Keepalived: remove %s (configure health checks and the frontend on your load balancer), or remove external to have hactl run the load balancer", what, name)))
	}
	ap := ep.Child("address")
	addrErr := checkDialAddress(ap, ext.Address, "your load balancer", "e.g. api.example.com or 10.0.0.100", "set its port in spec.loadBalancer.external.port")
	addrOK := addrErr == nil
	v.add(addrErr,
		checkPort(ep.Child("port"), ext.Port, "your load balancer's frontend port"),
		checkPort(p.Child("apiServerPort"), lb.APIServerPort, "the kube-apiserver port"))

	hp := field.NewPath("spec", "hosts")
	cps := 0
	for i, h := range c.Spec.Hosts {
		if h.HasRole(RoleLB) {
			v.add(field.Invalid(hp.Index(i).Child("roles"), string(RoleLB), "role lb runs hactl's HAProxy and Keepalived, and with spec.loadBalancer.external hactl installs neither: drop the role (your load balancer is not a host of the spec)"))
		}
		if !h.HasRole(RoleControlPlane) {
			continue
		}
		cps++
		if addrOK && h.Address == ext.Address {
			if ext.Port == lb.APIServerPort {
				v.add(field.Invalid(ap, ext.Address, fmt.Sprintf("is control-plane host %s (%s) at apiServerPort %d: that is one kube-apiserver, not a load balancer in front of them all; give your load balancer's own address", h.Name, hp.Index(i), lb.APIServerPort)))
			} else {
				v.warn(ap, "is control-plane host %s's address: a load balancer on one of the hosts it balances goes down with that host", h.Name)
			}
		}
	}
	if len(c.Spec.Hosts) > 0 && cps == 0 {
		v.add(field.Required(hp, "spec.loadBalancer.external has no backends: no host has role control-plane; give role control-plane to the hosts that run kube-apiserver (your load balancer forwards to them at apiServerPort)"))
	}
	if looksLikeSecret(lb.HealthCheck.CAFile) || strings.ContainsAny(lb.HealthCheck.CAFile, "\n\r") {
		v.add(field.Invalid(p.Child("healthCheck", "caFile"), "(value not shown)", "must be the path of a local CA certificate file (PEM), not its contents"))
	}
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
		case h.HasRole(RoleEtcd) && port == limits.EtcdMetricsPort:
			return i, "etcd's metrics endpoint"
		}
	}
	return 0, ""
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

// VRRPSecretProblem says what is wrong with a VRRP PASS secret ("" when nothing): it must be 1 to
// limits.MaxVRRPSecretLength characters of letters, digits and vrrpSecretChars. The message never
// quotes the secret. specload applies it to the secret spec.loadBalancer.auth names, and
// lb.NewAuthSecret to the one it renders.
func VRRPSecretProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > limits.MaxVRRPSecretLength:
		return fmt.Sprintf("is %d characters long: the auth secret must be at most %d characters (keepalived uses only the first %d and silently drops the rest, so a longer secret gives a false sense of strength and two clusters differing after character %d would accept each other); use a secret of at most %d characters",
			len(s), limits.MaxVRRPSecretLength, limits.MaxVRRPSecretLength, limits.MaxVRRPSecretLength, limits.MaxVRRPSecretLength)
	case strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(vrrpSecretChars, r))
	}):
		return "contains a character other than letters, digits and " + strings.Join(strings.Split(vrrpSecretChars, ""), " ") + " (white space, quotes, '#', '!', '$', braces and backslashes would break keepalived.conf)"
	}
	return ""
}

// VRRPVersion is the VRRP version keepalived runs for lb: 3 for an IPv6 VIP (keepalived's only
// choice, RFC 5798) and for an advertInterval that is not whole seconds (VRRPv3 counts
// centiseconds; VRRPv2 whole seconds, RFC 3768); 2 otherwise (keepalived's default for IPv4, the
// one that allows auth).
func VRRPVersion(lb *LoadBalancer) int {
	if p, err := netip.ParsePrefix(lb.VIP); err == nil && p.Addr().Is6() {
		return 3
	}
	if lb.AdvertInterval.Duration%time.Second != 0 {
		return 3
	}
	return 2
}
