// Package etcd models hactl's etcd members (names and URLs), renders their systemd unit from
// templates/etcd.service.tmpl, and talks to the cluster over TLS (client, status, quorum check).
package etcd

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/pki"
)

// URL returns scheme://addr:port, built with net/url and net.JoinHostPort so an IPv6 address is
// bracketed ("https://[fd00::1]:2379") and a zone is escaped (RFC 6874). IPv4-mapped IPv6 addresses
// are unmapped. It is the only place hactl builds etcd URLs.
func URL(scheme string, addr netip.Addr, port int) string {
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(addr.Unmap().String(), strconv.Itoa(port))}
	return u.String()
}

// Loopback returns the loopback address of addr's family: 127.0.0.1 for IPv4, ::1 for IPv6.
func Loopback(addr netip.Addr) netip.Addr {
	if addr.Unmap().Is4() {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.IPv6Loopback()
}

// Member is one etcd member: a host with role etcd.
type Member struct {
	// Name is the member name (the host's name, an RFC 1123 label).
	Name string
	// Address is the host's IP address; clients use it, and peers unless PeerAddress is set.
	Address netip.Addr
	// PeerAddress is the host's privateAddress, which peers use (zero: Address).
	PeerAddress netip.Addr
	ClientPort  int
	PeerPort    int
}

// ClientURL is https://<address>:<client port>.
func (m Member) ClientURL() string { return URL("https", m.Address, m.ClientPort) }

// PeerURL is https://<peer address>:<peer port>: the privateAddress when the host has one.
func (m Member) PeerURL() string { return URL("https", m.peerAddr(), m.PeerPort) }

func (m Member) peerAddr() netip.Addr {
	if m.PeerAddress.IsValid() {
		return m.PeerAddress
	}
	return m.Address
}

// Addrs are the member's addresses, which its server and peer certificates carry as SANs: Address,
// then PeerAddress when it differs.
func (m Member) Addrs() []netip.Addr {
	if m.PeerAddress.IsValid() && m.PeerAddress != m.Address {
		return []netip.Addr{m.Address, m.PeerAddress}
	}
	return []netip.Addr{m.Address}
}

// MembersFromSpec returns the spec's etcd hosts as members, in spec order. It expects a defaulted
// spec (ports set) and fails on an unparsable address or a missing port.
func MembersFromSpec(c *v1alpha1.Cluster) ([]Member, error) {
	e := c.Spec.Etcd
	if e.ClientPort <= 0 || e.PeerPort <= 0 {
		return nil, fmt.Errorf("etcd client and peer ports must be set (got %d, %d)", e.ClientPort, e.PeerPort)
	}
	var out []Member
	for _, h := range c.EtcdHosts() {
		a, err := netip.ParseAddr(h.Address)
		if err != nil {
			return nil, fmt.Errorf("host %s: address: %w", h.Name, err)
		}
		m := Member{Name: h.Name, Address: a.Unmap(), ClientPort: e.ClientPort, PeerPort: e.PeerPort}
		if h.PrivateAddress != "" {
			p, err := netip.ParseAddr(h.PrivateAddress)
			if err != nil {
				return nil, fmt.Errorf("host %s: privateAddress: %w", h.Name, err)
			}
			m.PeerAddress = p.Unmap()
		}
		out = append(out, m)
	}
	return out, nil
}

// HactlClientTLS returns the local files hactl talks to the members with: the CA and hactl's
// client certificate and key (pki.HactlClient) in spec.stateDir's pki/ directory. It reads nothing.
func HactlClientTLS(c *v1alpha1.Cluster) TLSFiles {
	dir := filepath.Join(c.Spec.StateDir, "pki")
	return TLSFiles{CA: pki.CertPath(dir, pki.CABase), Cert: pki.CertPath(dir, pki.HactlClient), Key: pki.KeyPath(dir, pki.HactlClient)}
}

// ClientURLs returns the members' client URLs, in the order given.
func ClientURLs(members []Member) []string {
	out := make([]string, 0, len(members))
	for _, m := range members {
		out = append(out, m.ClientURL())
	}
	return out
}

// InitialCluster returns etcd's --initial-cluster value, "name=peerURL,...", sorted by member name so
// every member is given the same string whatever order the caller used.
func InitialCluster(members []Member) string {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, m.Name+"="+m.PeerURL())
	}
	return strings.Join(parts, ",")
}
