package pki

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"
)

// Fingerprint is "SHA256:" followed by the lowercase hex SHA-256 of cert's DER encoding: what
// `openssl x509 -noout -fingerprint -sha256` prints, without the colons.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "SHA256:" + hex.EncodeToString(sum[:])
}

// SignedBy reports (as nil) whether cert was issued by ca: ca's subject is cert's issuer and ca's key
// signed it. For ca itself (the same certificate) it is nil too. Validity periods are not checked
// here (expiry is reported separately).
func SignedBy(cert, ca *x509.Certificate) error {
	if bytes.Equal(cert.Raw, ca.Raw) {
		return nil
	}
	if !bytes.Equal(cert.RawIssuer, ca.RawSubject) {
		return fmt.Errorf("issued by %q, not by the CA %q", cert.Issuer.String(), ca.Subject.String())
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("not signed by the CA %q (%s): %w", ca.Subject.String(), Fingerprint(ca), err)
	}
	return nil
}

// ParseCA parses a CA certificate and its key (PEM, as read back from a member) and checks that the
// certificate is a CA valid now and that the key is its key (errors wrap ErrCAMismatch for a key
// that belongs to another certificate).
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	if !keyMatches(cert, key) {
		return nil, fmt.Errorf("%w: the key is not the key of CA %s", ErrCAMismatch, Fingerprint(cert))
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("certificate %q is not a CA certificate", cert.Subject.String())
	}
	if now := time.Now(); now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA certificate %s is not valid now (valid %s to %s)", Fingerprint(cert),
			cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// RestoreCA writes a CA read back from a member (see ParseCA) to <dir>/ca.key (0600) and
// <dir>/ca.crt (0644), atomically, key first. It never replaces a CA: when both files exist and hold
// this very certificate nothing is written, when only ca.crt exists and is this certificate the key
// is written; any other existing ca.crt or ca.key is an error wrapping ErrCAMismatch. It returns the
// CA as loaded from dir.
func RestoreCA(dir string, certPEM, keyPEM []byte) (*CA, error) {
	ca, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	crtPath, keyPath := CertPath(dir, CABase), KeyPath(dir, CABase)
	crtOK, err := exists(crtPath)
	if err != nil {
		return nil, err
	}
	keyOK, err := exists(keyPath)
	if err != nil {
		return nil, err
	}
	if crtOK && !keyOK {
		// Only the key was lost: put it back if the certificate is this very CA.
		local, err := ReadCert(crtPath)
		if err == nil && bytes.Equal(local.Raw, ca.Cert.Raw) {
			if err := writeFileAtomic(keyPath, keyPEM, KeyFileMode); err != nil {
				return nil, err
			}
			return loadCA(crtPath, keyPath, time.Now())
		}
	}
	if crtOK || keyOK {
		local, lerr := loadCA(crtPath, keyPath, time.Now())
		if lerr != nil {
			return nil, fmt.Errorf("%w: the state dir holds a CA that cannot be loaded (%v); refusing to replace it with the members' CA %s",
				ErrCAMismatch, lerr, Fingerprint(ca.Cert))
		}
		if !bytes.Equal(local.Cert.Raw, ca.Cert.Raw) {
			return nil, fmt.Errorf("%w: the state dir's CA %s is not the members' CA %s; refusing to replace it",
				ErrCAMismatch, Fingerprint(local.Cert), Fingerprint(ca.Cert))
		}
		return local, nil
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(keyPath, keyPEM, KeyFileMode); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(crtPath, certPEM, CertFileMode); err != nil {
		return nil, err
	}
	return loadCA(crtPath, keyPath, time.Now())
}

// RestoreLeaf writes a leaf certificate and key read back from a member to <dir>/<base>.key (0600)
// and <dir>/<base>.crt (0644), atomically, key first, when neither exists yet. It checks that the key
// is the certificate's and that ca issued it; it returns written=false without error when the files
// already exist (they are never replaced here: EnsureMember decides whether they are usable).
func (ca *CA) RestoreLeaf(dir, base string, certPEM, keyPEM []byte) (written bool, err error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return false, fmt.Errorf("%s certificate: %w", base, err)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return false, fmt.Errorf("%s key: %w", base, err)
	}
	if !keyMatches(cert, key) {
		return false, fmt.Errorf("%s: the key does not match the certificate", base)
	}
	if err := SignedBy(cert, ca.Cert); err != nil {
		return false, fmt.Errorf("%s certificate: %w", base, err)
	}
	crtPath, keyPath := CertPath(dir, base), KeyPath(dir, base)
	for _, p := range []string{crtPath, keyPath} {
		ok, err := exists(p)
		if err != nil {
			return false, err
		}
		if ok {
			return false, nil
		}
	}
	if err := ensureDir(dir); err != nil {
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

// UsableMemberCert reports (as nil) whether cert would be kept by EnsureMember as member name's
// server or peer certificate, judging the certificate alone (no key): issued by ca and valid under
// it, CN name, server+client usage, SANs exactly MemberSANs(name, addrs), more than RenewBefore left.
// hactl uses it on certificates found on a host, before their keys are read.
func (ca *CA) UsableMemberCert(cert *x509.Certificate, name string, addrs []netip.Addr) error {
	dns, ips, err := MemberSANs(name, addrs)
	if err != nil {
		return err
	}
	return ca.certUsable(cert, leafProfile{cn: name, usages: serverClientUsages, dns: dns, ips: ips}, time.Now())
}
