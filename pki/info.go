package pki

import (
	"crypto/x509"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// CertInfo describes one certificate for `hactl status` (JSON field names are part of -o json).
type CertInfo struct {
	// Path is the file, relative to the PKI dir ("ca.crt", "cp-a/server.crt").
	Path        string    `json:"path"`
	Subject     string    `json:"subject"` // RFC 2253 string, e.g. "CN=etcd-ca"
	Issuer      string    `json:"issuer"`
	Serial      string    `json:"serial"` // hex
	IsCA        bool      `json:"isCA"`
	DNSNames    []string  `json:"dnsNames,omitempty"`
	IPAddresses []string  `json:"ipAddresses,omitempty"`
	ExtKeyUsage []string  `json:"extKeyUsage,omitempty"` // "serverAuth", "clientAuth"
	NotBefore   time.Time `json:"notBefore"`
	NotAfter    time.Time `json:"notAfter"`
}

// NewCertInfo summarises cert; path is copied into the result as is.
func NewCertInfo(path string, cert *x509.Certificate) CertInfo {
	ci := CertInfo{
		Path:      path,
		Subject:   cert.Subject.String(),
		Issuer:    cert.Issuer.String(),
		Serial:    cert.SerialNumber.Text(16),
		IsCA:      cert.IsCA,
		DNSNames:  cert.DNSNames,
		NotBefore: cert.NotBefore.UTC(),
		NotAfter:  cert.NotAfter.UTC(),
	}
	for _, ip := range cert.IPAddresses {
		ci.IPAddresses = append(ci.IPAddresses, ip.String())
	}
	for _, u := range cert.ExtKeyUsage {
		ci.ExtKeyUsage = append(ci.ExtKeyUsage, extKeyUsageName(u))
	}
	return ci
}

func extKeyUsageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	case x509.ExtKeyUsageAny:
		return "any"
	default:
		return fmt.Sprintf("extKeyUsage(%d)", int(u))
	}
}

// ListCerts returns every current certificate (*.crt) under dir, recursively, in lexical path order.
// Files renamed aside (*.old) and temp files are skipped. A file that cannot be parsed is an error.
func ListCerts(dir string) ([]CertInfo, error) {
	certs, err := LoadCerts(dir)
	if err != nil {
		return nil, err
	}
	out := make([]CertInfo, len(certs))
	for i, c := range certs {
		out[i] = NewCertInfo(c.Path, c.Cert)
	}
	return out, nil
}

// LoadedCert is a certificate file read by LoadCerts.
type LoadedCert struct {
	Path string // relative to the directory given to LoadCerts, with forward slashes
	Cert *x509.Certificate
}

// LoadCerts reads every current certificate (*.crt) under dir as ListCerts lists them.
func LoadCerts(dir string) ([]LoadedCert, error) {
	var out []LoadedCert
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".crt") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		cert, err := ReadCert(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out = append(out, LoadedCert{Path: filepath.ToSlash(rel), Cert: cert})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list certificates in %s: %w", dir, err)
	}
	return out, nil
}
