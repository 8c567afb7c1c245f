package pki

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Extended key usages of the leaf profiles (kubeadm: etcd/server and etcd/peer are server+client,
// apiserver-etcd-client and healthcheck clients are client only).
var (
	serverClientUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientUsages       = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
)

// nameRE is an RFC 1123 label: the shape of member names (api/v1alpha1) and client cert base names.
// It also keeps names safe as path elements.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func checkName(kind, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("invalid %s name %q: must be an RFC 1123 label", kind, name)
	}
	return nil
}

// leafProfile is what a leaf certificate must contain.
type leafProfile struct {
	cn     string
	usages []x509.ExtKeyUsage
	dns    []string
	ips    []netip.Addr
}

// MemberSANs returns the SANs a member's server and peer certificates carry, in order: DNS names
// (name, "localhost") and IP addresses (addrs as given, then 127.0.0.1 and ::1), without duplicates.
// IPv4-mapped IPv6 addresses are unmapped. It fails on an invalid or zoned address or an empty addrs.
func MemberSANs(name string, addrs []netip.Addr) (dns []string, ips []netip.Addr, err error) {
	if len(addrs) == 0 {
		return nil, nil, fmt.Errorf("member %q: no address", name)
	}
	dns = appendUnique(dns, name, "localhost")
	for _, a := range addrs {
		if !a.IsValid() {
			return nil, nil, fmt.Errorf("member %q: invalid address", name)
		}
		if a.Zone() != "" {
			return nil, nil, fmt.Errorf("member %q: address %s has a zone, which a certificate cannot carry", name, a)
		}
		ips = appendUnique(ips, a.Unmap())
	}
	ips = appendUnique(ips, netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback())
	return dns, ips, nil
}

func appendUnique[T comparable](s []T, vs ...T) []T {
	for _, v := range vs {
		if !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	return s
}

// SANError says how a certificate's SANs differ from the required ones. Entries are "DNS:<name>" or
// "IP:<addr>".
type SANError struct {
	Subject    string
	Missing    []string
	Unexpected []string
}

func (e *SANError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "missing "+strings.Join(e.Missing, ", "))
	}
	if len(e.Unexpected) > 0 {
		parts = append(parts, "unexpected "+strings.Join(e.Unexpected, ", "))
	}
	return fmt.Sprintf("certificate %q SANs differ from the required set: %s", e.Subject, strings.Join(parts, "; "))
}

// CheckSANs verifies that cert's SANs are exactly those MemberSANs(name, addrs) requires: every
// required name and address present, nothing else. A difference is returned as *SANError. Run it on a
// member's server and peer certificates before distributing them.
func CheckSANs(cert *x509.Certificate, name string, addrs []netip.Addr) error {
	dns, ips, err := MemberSANs(name, addrs)
	if err != nil {
		return err
	}
	return checkSANs(cert, dns, ips)
}

func checkSANs(cert *x509.Certificate, dns []string, ips []netip.Addr) error {
	want := sanSet(dns, ips)
	var haveIPs []netip.Addr
	for _, ip := range cert.IPAddresses {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return fmt.Errorf("certificate %q: malformed IP SAN %v", cert.Subject.CommonName, ip)
		}
		haveIPs = append(haveIPs, a.Unmap())
	}
	have := sanSet(cert.DNSNames, haveIPs)
	e := &SANError{Subject: cert.Subject.CommonName}
	for _, s := range want.order {
		if !have.has[s] {
			e.Missing = append(e.Missing, s)
		}
	}
	for _, s := range have.order {
		if !want.has[s] {
			e.Unexpected = append(e.Unexpected, s)
		}
	}
	for _, m := range cert.EmailAddresses {
		e.Unexpected = append(e.Unexpected, "email:"+m)
	}
	for _, u := range cert.URIs {
		e.Unexpected = append(e.Unexpected, "URI:"+u.String())
	}
	if len(e.Missing) > 0 || len(e.Unexpected) > 0 {
		return e
	}
	return nil
}

type sans struct {
	order []string
	has   map[string]bool
}

func sanSet(dns []string, ips []netip.Addr) sans {
	s := sans{has: map[string]bool{}}
	add := func(v string) {
		if !s.has[v] {
			s.has[v] = true
			s.order = append(s.order, v)
		}
	}
	for _, d := range dns {
		add("DNS:" + strings.ToLower(d))
	}
	for _, ip := range ips {
		add("IP:" + ip.String())
	}
	return s
}

// EnsureMember makes sure <dir>/<name>/server.{crt,key} and peer.{crt,key} exist and are usable:
// signed by ca, CN name, extended key usage server+client, SANs exactly MemberSANs(name, addrs), key
// matching, and more than RenewBefore (30 days) of validity left. Usable files are kept; otherwise a
// new key and certificate (valid LeafValidity, capped at the CA's NotAfter) are written after the old
// files are renamed aside. changed reports whether anything was (re)issued.
func (ca *CA) EnsureMember(dir, name string, addrs []netip.Addr) (changed bool, err error) {
	if err := checkName("member", name); err != nil {
		return false, err
	}
	dns, ips, err := MemberSANs(name, addrs)
	if err != nil {
		return false, err
	}
	mdir := MemberDir(dir, name)
	if err := ensureDir(mdir); err != nil {
		return false, err
	}
	p := leafProfile{cn: name, usages: serverClientUsages, dns: dns, ips: ips}
	for _, base := range []string{ServerBase, PeerBase} {
		c, err := ca.ensureLeaf(mdir, base, p, time.Now())
		if err != nil {
			return changed, fmt.Errorf("member %s: %s certificate: %w", name, base, err)
		}
		changed = changed || c
	}
	return changed, nil
}

// EnsureClient makes sure <dir>/<name>.{crt,key} is a usable client certificate: signed by ca, CN cn,
// extended key usage client auth only, no SANs, key matching, more than RenewBefore left. Otherwise
// it is reissued as EnsureMember does. name is the file base name (HactlClient, APIServerClient).
func (ca *CA) EnsureClient(dir, name, cn string) (changed bool, err error) {
	if err := checkName("client certificate", name); err != nil {
		return false, err
	}
	if cn == "" {
		return false, errors.New("client certificate: empty common name")
	}
	if err := ensureDir(dir); err != nil {
		return false, err
	}
	c, err := ca.ensureLeaf(dir, name, leafProfile{cn: cn, usages: clientUsages}, time.Now())
	if err != nil {
		return false, fmt.Errorf("client certificate %s: %w", name, err)
	}
	return c, nil
}

// ensureLeaf keeps <dir>/<base>.{crt,key} if they satisfy p, else moves them aside and issues new ones.
func (ca *CA) ensureLeaf(dir, base string, p leafProfile, now time.Time) (bool, error) {
	crtPath, keyPath := CertPath(dir, base), KeyPath(dir, base)
	if ca.usable(crtPath, keyPath, p, now) == nil {
		return false, nil
	}
	for _, f := range []string{crtPath, keyPath} {
		if err := moveAside(f, now); err != nil {
			return false, err
		}
	}
	certPEM, keyPEM, err := ca.issue(p, now)
	if err != nil {
		return false, err
	}
	if err := writeFileAtomic(keyPath, keyPEM, KeyFileMode); err != nil {
		return false, err
	}
	if err := writeFileAtomic(crtPath, certPEM, CertFileMode); err != nil {
		return false, err
	}
	return true, nil
}

// usable returns nil if the existing files satisfy p, else why not.
func (ca *CA) usable(crtPath, keyPath string, p leafProfile, now time.Time) error {
	cert, err := ReadCert(crtPath)
	if err != nil {
		return err
	}
	key, err := ReadKey(keyPath)
	if err != nil {
		return err
	}
	if !keyMatches(cert, key) {
		return errors.New("key does not match certificate")
	}
	return ca.certUsable(cert, p, now)
}

// certUsable is usable without the key.
func (ca *CA) certUsable(cert *x509.Certificate, p leafProfile, now time.Time) error {
	if err := ca.verify(cert, p.usages, now); err != nil {
		return err
	}
	if cert.NotAfter.Sub(now) <= RenewBefore {
		return fmt.Errorf("expires %s, within %s", cert.NotAfter.UTC().Format(time.RFC3339), RenewBefore)
	}
	if cert.Subject.CommonName != p.cn {
		return fmt.Errorf("CN %q, want %q", cert.Subject.CommonName, p.cn)
	}
	if !slices.Equal(sortedUsages(cert.ExtKeyUsage), sortedUsages(p.usages)) || len(cert.UnknownExtKeyUsage) > 0 {
		return errors.New("extended key usage differs")
	}
	return checkSANs(cert, p.dns, p.ips)
}

// verify checks that cert chains to ca for every usage in usages at time now.
func (ca *CA) verify(cert *x509.Certificate, usages []x509.ExtKeyUsage, now time.Time) error {
	for _, u := range usages {
		if _, err := cert.Verify(x509.VerifyOptions{
			Roots:       ca.Pool(),
			CurrentTime: now,
			KeyUsages:   []x509.ExtKeyUsage{u},
		}); err != nil {
			return fmt.Errorf("not valid under CA %q: %w", ca.Cert.Subject.CommonName, err)
		}
	}
	return nil
}

func sortedUsages(u []x509.ExtKeyUsage) []x509.ExtKeyUsage {
	s := slices.Clone(u)
	slices.Sort(s)
	return s
}

// issue creates a new key and a certificate for p signed by ca.
func (ca *CA) issue(p leafProfile, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(LeafValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: p.cn},
		DNSNames:              p.dns,
		NotBefore:             now.Add(-backdate).UTC(),
		NotAfter:              notAfter.UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           p.usages,
		BasicConstraintsValid: true,
	}
	for _, ip := range p.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %q: %w", p.cn, err)
	}
	return encodeCert(der), keyPEM, nil
}
