package schedule

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hactl/hactl/internal/atomicfile"
)

// CertificatesTextfile is the certificate-expiry textfile's name, written next to the backup
// textfile (the same node_exporter textfile collector directory) by every scheduled run.
const CertificatesTextfile = "hactl_certificates.prom"

// MetricCertificateExpiry is the certificate-expiry gauge: the Unix time of each certificate's
// NotAfter, labelled with cluster, member, path and subject (alert on it minus time()).
const MetricCertificateExpiry = "hactl_certificate_expiry_timestamp_seconds"

// CertificateExpiry is one certificate file's first certificate.
type CertificateExpiry struct {
	// Path is the file; Subject the certificate's subject (RFC 2253 string); NotAfter its expiry.
	Path     string
	Subject  string
	NotAfter time.Time
}

// ScanCertificates returns the first certificate of every *.crt file under dirs (recursively; a
// missing directory is skipped: a member without Kubernetes has no /etc/kubernetes/pki), sorted by
// path. Errors name the file: unreadable, no PEM certificate, or a certificate x509 cannot parse.
func ScanCertificates(dirs []string) ([]CertificateExpiry, error) {
	var out []CertificateExpiry
	var errs []error
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == dir {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".crt") {
				return nil
			}
			c, err := readCertificate(p)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			out = append(out, CertificateExpiry{Path: p, Subject: c.Subject.String(), NotAfter: c.NotAfter})
			return nil
		})
		if err != nil && !errors.Is(err, filepath.SkipDir) {
			errs = append(errs, fmt.Errorf("scan %s: %w", dir, err))
		}
	}
	slices.SortFunc(out, func(a, b CertificateExpiry) int { return strings.Compare(a.Path, b.Path) })
	return out, errors.Join(errs...)
}

func readCertificate(path string) (*x509.Certificate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", path)
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return c, nil
		}
	}
}

// FormatCertificates renders certs as a textfile (text exposition format, through a
// prometheus.Registry like Format): one MetricCertificateExpiry sample per certificate.
func FormatCertificates(cluster, member string, certs []CertificateExpiry) ([]byte, error) {
	reg := prometheus.NewPedanticRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricCertificateExpiry,
		Help:        "Unix time the certificate expires (its NotAfter); hactl pki check lists them, hactl pki renew renews etcd's.",
		ConstLabels: prometheus.Labels{labelCluster: cluster, labelMember: member}},
		[]string{"path", "subject"})
	for _, c := range certs {
		g.WithLabelValues(c.Path, c.Subject).Set(unixSeconds(c.NotAfter))
	}
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("certificates textfile: %w", err)
	}
	b, err := encodeText(reg)
	if err != nil {
		return nil, fmt.Errorf("certificates textfile: %w", err)
	}
	return b, nil
}

// WriteCertificatesTextfile scans dirs and writes the certificates' textfile atomically (temp +
// rename, 0644) to path. Certificates that cannot be read are left out and named in the returned
// error, after the file is written with the others.
func WriteCertificatesTextfile(path, cluster, member string, dirs []string) error {
	certs, scanErr := ScanCertificates(dirs)
	b, err := FormatCertificates(cluster, member, certs)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return scanErr
}
