// Package pki creates and maintains the etcd PKI in hactl's state dir: one etcd CA, per member a
// server and a peer certificate, and client certificates (hactl's own and kube-apiserver's).
//
// The dir argument of every function is the PKI directory, <stateDir>/pki (docs/design.md):
//
//	ca.crt, ca.key                        the etcd CA (CN "etcd-ca", 10 years)
//	<member>/server.crt, server.key       serving certificate of the member's client port
//	<member>/peer.crt, peer.key           certificate for the member's peer port (server and client)
//	hactl-etcd-client.crt, .key           hactl's client certificate (CN "hactl")
//	apiserver-etcd-client.crt, .key       kube-apiserver's client certificate (CN "kube-apiserver-etcd-client")
//
// Keys are ECDSA P-256, written as PEM "EC PRIVATE KEY" (SEC 1) with mode 0600; certificates are PEM
// with mode 0644; directories 0700; every write is atomic (temp file, fsync, rename in the same dir).
// Certificate profiles follow kubeadm's (cmd/kubeadm/app/phases/certs): CA 10 years, leaves 1 year,
// etcd server and peer certificates usable for both server and client auth with SANs
// <member name>, localhost, the member's addresses, 127.0.0.1 and ::1.
//
// Nothing is ever deleted: a certificate that has to be reissued is renamed aside
// (<file>.<UTC timestamp>.old) first, and a second CA is never created over an existing one.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Validity periods and renewal threshold (kubeadm: CACertificateValidityPeriod = 10 years,
// CertificateValidityPeriod = 1 year; kubeadm warns about certificates expiring within 30 days).
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
	// RenewBefore: an existing leaf certificate with less validity left than this is reissued.
	RenewBefore = 30 * 24 * time.Hour
	// backdate is subtracted from NotBefore to tolerate clock skew between hosts (kubeadm: 5 minutes).
	backdate = 5 * time.Minute
)

// Names of the files and certificates in the PKI dir.
const (
	CACommonName = "etcd-ca"
	CABase       = "ca"     // ca.crt, ca.key
	ServerBase   = "server" // <member>/server.crt, .key
	PeerBase     = "peer"   // <member>/peer.crt, .key

	// HactlClient is hactl's own client certificate (hactl-etcd-client.{crt,key}, CN HactlClientCN).
	HactlClient   = "hactl-etcd-client"
	HactlClientCN = "hactl"
	// APIServerClient is kube-apiserver's client certificate, named as kubeadm names it
	// (apiserver-etcd-client.{crt,key}, CN APIServerClientCN).
	APIServerClient   = "apiserver-etcd-client"
	APIServerClientCN = "kube-apiserver-etcd-client"
)

// ErrCAMismatch is returned (wrapped) when ca.key does not belong to ca.crt, or one of the two is missing.
var ErrCAMismatch = errors.New("etcd CA certificate and key do not match")

// CertPath returns <dir>/<base>.crt.
func CertPath(dir, base string) string { return filepath.Join(dir, base+".crt") }

// KeyPath returns <dir>/<base>.key.
func KeyPath(dir, base string) string { return filepath.Join(dir, base+".key") }

// MemberDir returns <dir>/<member>, the directory holding a member's server and peer certificates.
func MemberDir(dir, member string) string { return filepath.Join(dir, member) }

// CA is the etcd certificate authority loaded from (or created in) a PKI dir.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is ca.crt as stored.
	CertPEM []byte
}

// LoadOrCreateCA loads <dir>/ca.crt and <dir>/ca.key, or creates both (ECDSA P-256, CN "etcd-ca",
// valid 10 years) if neither exists; created reports the latter. It never replaces a CA: it returns
// an error wrapping ErrCAMismatch if only one of the two files exists or the key does not match the
// certificate, and an error if the certificate is not a CA or is outside its validity period.
func LoadOrCreateCA(dir string) (ca *CA, created bool, err error) {
	crtPath, keyPath := CertPath(dir, CABase), KeyPath(dir, CABase)
	crtOK, err := exists(crtPath)
	if err != nil {
		return nil, false, err
	}
	keyOK, err := exists(keyPath)
	if err != nil {
		return nil, false, err
	}
	switch {
	case crtOK && keyOK:
		ca, err := loadCA(crtPath, keyPath, time.Now())
		return ca, false, err
	case crtOK:
		return nil, false, fmt.Errorf("%w: %s exists but %s is missing; refusing to create a second CA", ErrCAMismatch, crtPath, keyPath)
	case keyOK:
		return nil, false, fmt.Errorf("%w: %s exists but %s is missing; refusing to create a second CA", ErrCAMismatch, keyPath, crtPath)
	}

	if err := ensureDir(dir); err != nil {
		return nil, false, err
	}
	ca, keyPEM, err := newCA(time.Now())
	if err != nil {
		return nil, false, err
	}
	// Key first: a crash in between leaves a key without a certificate, which is refused above
	// rather than silently replaced.
	if err := writeFileAtomic(keyPath, keyPEM, KeyFileMode); err != nil {
		return nil, false, err
	}
	if err := writeFileAtomic(crtPath, ca.CertPEM, CertFileMode); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

func loadCA(crtPath, keyPath string, now time.Time) (*CA, error) {
	certPEM, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", crtPath, err)
	}
	key, err := ReadKey(keyPath)
	if err != nil {
		return nil, err
	}
	if !keyMatches(cert, key) {
		return nil, fmt.Errorf("%w: %s is not the key of %s", ErrCAMismatch, keyPath, crtPath)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s is not a CA certificate", crtPath)
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA certificate %s is not valid now (valid %s to %s)", crtPath,
			cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

func newCA(now time.Time) (*CA, []byte, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: CACommonName},
		NotBefore:             now.Add(-backdate).UTC(),
		NotAfter:              now.Add(CAValidity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse new CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der)}, keyPEM, nil
}

// Pool returns a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// newKey generates an ECDSA P-256 key and its PEM ("EC PRIVATE KEY").
func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate ECDSA P-256 key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// newSerial returns a random positive 127-bit serial number (RFC 5280: at most 20 octets, positive).
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// ParseCertPEM parses the first CERTIFICATE block of PEM data.
func ParseCertPEM(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM CERTIFICATE block found")
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse certificate: %w", err)
			}
			return c, nil
		}
	}
}

// ReadCert reads and parses a PEM certificate file.
func ReadCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read certificate: %w", err)
	}
	c, err := ParseCertPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ReadKey reads a PEM private key file in SEC 1 ("EC PRIVATE KEY"), PKCS #8 ("PRIVATE KEY") or
// PKCS #1 ("RSA PRIVATE KEY") form.
func ReadKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	s, err := parseKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// parseKeyPEM parses the first PEM block of data as a private key (see ReadKey). Errors never
// quote the key material.
func parseKeyPEM(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block found")
	}
	var key any
	var err error
	switch b.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("unsupported PEM block %q", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key type %T cannot sign", key)
	}
	return s, nil
}

// keyMatches reports whether key is the private key of cert.
func keyMatches(cert *x509.Certificate, key crypto.Signer) bool {
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return false
	}
	return bytes.Equal(pub, cert.RawSubjectPublicKeyInfo)
}
