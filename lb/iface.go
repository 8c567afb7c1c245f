package lb

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// IfAddr is one address of a host's interface, as `ip -json address show` lists it.
type IfAddr struct {
	Interface string
	// Prefix is the address with its prefix length, e.g. 172.28.0.21/24.
	Prefix netip.Prefix
}

// ParseIPAddrJSON reads the output of `ip -json address show` (iproute2): one object per interface
// with "ifname" and "addr_info" entries of "local" and "prefixlen". Addresses that don't parse
// (none should) are skipped; malformed JSON is an error.
func ParseIPAddrJSON(data []byte) ([]IfAddr, error) {
	var links []struct {
		IfName   string `json:"ifname"`
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(data, &links); err != nil {
		return nil, fmt.Errorf("parse `ip -json address show` output: %w", err)
	}
	var out []IfAddr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			ip, err := netip.ParseAddr(a.Local)
			if err != nil {
				continue
			}
			p, err := ip.Prefix(a.PrefixLen)
			if err != nil {
				continue
			}
			out = append(out, IfAddr{Interface: l.IfName, Prefix: netip.PrefixFrom(ip, p.Bits())})
		}
	}
	return out, nil
}

// InterfaceFor returns the interface of a host that carries the VIP's network: the one interface
// with an address whose network holds the VIP, or an address inside the VIP's prefix (the VIP
// itself, when the host holds it, counts too). It returns an error when no interface or several do
// (then spec.loadBalancer.interface must say which).
func InterfaceFor(vip netip.Prefix, addrs []IfAddr) (string, error) {
	var found []string
	for _, a := range addrs {
		if !a.Prefix.Masked().Contains(vip.Addr()) && !vip.Contains(a.Prefix.Addr()) {
			continue
		}
		if !slices.Contains(found, a.Interface) {
			found = append(found, a.Interface)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("no interface has an address in the VIP's network %s: the host is not on the LB network, or set spec.loadBalancer.interface", vip.Masked())
	default:
		return "", fmt.Errorf("several interfaces have an address in the VIP's network %s (%s): set spec.loadBalancer.interface", vip.Masked(), strings.Join(found, ", "))
	}
}
