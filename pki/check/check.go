// Package check implements `hactl pki check`: it reads every certificate on the etcd members and
// control-plane hosts over SSH (certificates only, never keys) and in the local state dir, and judges
// each against the state dir's CA and an expiry horizon.
package check

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// WarnDays: a certificate expiring within this many days is a problem for `hactl pki check`
// (kubeadm's certificate check uses 30 days too; pki.RenewBefore re-issues at the same point).
const WarnDays = 30

// Options configure Run.
type Options struct {
	// Cluster is the loaded, defaulted and validated spec.
	Cluster *v1alpha1.Cluster
	// AcceptNewHostKeys appends unknown SSH host keys to the known_hosts file.
	AcceptNewHostKeys bool
	// Printer receives debug lines (remote commands).
	Printer *ui.Printer
	// Prompt asks for a key passphrase or the sudo password (see Options.Prompt).
	Prompt provision.Prompter
	// Now is the time expiry is judged at (zero: time.Now()).
	Now time.Time
}

// CertCheck is one certificate in a Report (JSON field names are part of `pki check -o json`).
type CertCheck struct {
	pki.CertInfo
	// Fingerprint is pki.Fingerprint of the certificate.
	Fingerprint string `json:"fingerprint"`
	// DaysLeft is the number of whole days until NotAfter (negative once expired).
	DaysLeft int `json:"daysLeft"`
	// SignedByCA: issued by the state dir's CA (for a CA certificate: it is that CA).
	SignedByCA bool `json:"signedByCA"`
	// Problems are why this certificate fails the check (expiring within WarnDays, expired,
	// not issued by the CA); empty when it passes.
	Problems []string `json:"problems,omitempty"`
}

// HostCerts are the certificates found on one host: under /etc/etcd/pki on an etcd member, and
// kube-apiserver's etcd CA and client certificate (kubeadm's paths under /etc/kubernetes/pki) on
// a control-plane host.
type HostCerts struct {
	Host    string `json:"host"`
	Address string `json:"address"`
	// Error is why the host could not be checked ("" when it was).
	Error        string      `json:"error,omitempty"`
	Certificates []CertCheck `json:"certificates"`
}

// Report is the result of Run (`hactl pki check -o json`).
type Report struct {
	Cluster string `json:"cluster"`
	// CA is the state dir's CA certificate every other certificate is checked against.
	CA CertCheck `json:"ca"`
	// WarnDays is the expiry horizon (WarnDays).
	WarnDays int         `json:"warnDays"`
	Hosts    []HostCerts `json:"hosts"`
	// Local are the certificates in the state dir (paths relative to its pki/ dir).
	Local []CertCheck `json:"local"`
	// Problems lists every failing certificate as "<host>:<path>: <why>" ("local:" for the state dir).
	Problems []string `json:"problems,omitempty"`
	// OK: every host was checked and no certificate has a problem.
	OK bool `json:"ok"`
}

// NoLocalCAError: the state dir holds no CA to check the hosts' certificates against.
type NoLocalCAError struct {
	StateDir string
	Err      error
}

func (e *NoLocalCAError) Error() string {
	return fmt.Sprintf("the state dir %s holds no etcd CA (pki/ca.crt: %v): run 'hactl bootstrap' first (on an existing cluster it "+
		"recovers the state dir from the members)", e.StateDir, e.Err)
}

func (e *NoLocalCAError) Unwrap() error { return e.Err }

// Run reads every certificate under /etc/etcd/pki on every etcd host over SSH (certificates
// only, never keys: one command per host) and every certificate in the state dir, and checks each
// against the state dir's CA and WarnDays. It returns the report and, when some host could not
// be read, an error naming those hosts (the report then has their Error set). Problems with the
// certificates themselves are in the report (OK false), not in the error.
func Run(ctx context.Context, opt Options) (*Report, error) {
	c := opt.Cluster
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	pkiDir := filepath.Join(c.Spec.StateDir, "pki")
	ca, err := pki.ReadCert(pki.CertPath(pkiDir, pki.CABase))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &NoLocalCAError{StateDir: c.Spec.StateDir, Err: err}
		}
		return nil, err
	}
	rep := &Report{Cluster: c.Metadata.Name, CA: checkCert(pki.CertPath(pkiDir, pki.CABase), ca, ca, now), WarnDays: WarnDays}
	local, err := pki.LoadCerts(pkiDir)
	if err != nil {
		return nil, err
	}
	for _, lc := range local {
		rep.Local = append(rep.Local, checkCert(lc.Path, lc.Cert, ca, now))
	}

	var hosts []v1alpha1.Host
	for _, h := range c.Spec.Hosts {
		if h.HasRole(v1alpha1.RoleEtcd) || h.HasRole(v1alpha1.RoleControlPlane) {
			hosts = append(hosts, h)
		}
	}
	rep.Hosts = make([]HostCerts, len(hosts))
	d, err := provision.FromSpec(c, provision.SpecOptions{AcceptNewHostKeys: opt.AcceptNewHostKeys, Prompt: opt.Prompt, OnNewHostKey: opt.Printer.NewHostKey})
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	var mu sync.Mutex
	idx := map[string]int{}
	for i, h := range hosts {
		idx[h.Name] = i
		rep.Hosts[i] = HostCerts{Host: h.Name, Address: h.Address}
	}
	runErr := provision.ForEach(ctx, hosts, c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name },
		func(ctx context.Context, h v1alpha1.Host) error {
			certs, err := readHostCerts(ctx, h, d, c.Spec.SSH.CommandTimeout.Duration, opt.Printer)
			mu.Lock()
			defer mu.Unlock()
			hc := &rep.Hosts[idx[h.Name]]
			if err != nil {
				hc.Error = err.Error()
				return err
			}
			for _, rc := range certs {
				if rc.err != nil {
					hc.Certificates = append(hc.Certificates, CertCheck{CertInfo: pki.CertInfo{Path: rc.path}, Problems: []string{rc.err.Error()}})
					continue
				}
				hc.Certificates = append(hc.Certificates, checkCert(rc.path, rc.cert, ca, now))
			}
			return nil
		})
	for i, hc := range rep.Hosts {
		for _, cc := range hc.Certificates {
			for _, p := range cc.Problems {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s:%s: %s", hc.Host, cc.Path, p))
			}
		}
		if hc.Error != "" {
			continue
		}
		h := hosts[i]
		has := func(pred func(string) bool) bool {
			return slices.ContainsFunc(hc.Certificates, func(cc CertCheck) bool { return pred(cc.Path) })
		}
		if h.HasRole(v1alpha1.RoleEtcd) && !has(func(p string) bool { return strings.HasPrefix(p, etcd.RemotePKIDir+"/") }) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: no certificate under %s (not bootstrapped?)", hc.Host, etcd.RemotePKIDir))
		}
		if h.HasRole(v1alpha1.RoleControlPlane) {
			for _, f := range kubeCertFiles {
				if !has(func(p string) bool { return p == f }) {
					rep.Problems = append(rep.Problems, fmt.Sprintf("%s:%s: missing: kube-apiserver cannot reach etcd without it; re-run 'hactl bootstrap' (phase kube/etcd-certs installs it)", hc.Host, f))
				}
			}
		}
	}
	for _, cc := range rep.Local {
		for _, p := range cc.Problems {
			rep.Problems = append(rep.Problems, fmt.Sprintf("local:%s: %s", cc.Path, p))
		}
	}
	rep.OK = runErr == nil && len(rep.Problems) == 0
	return rep, runErr
}

// checkCert judges one certificate against the CA at time now.
func checkCert(path string, cert, ca *x509.Certificate, now time.Time) CertCheck {
	cc := CertCheck{CertInfo: pki.NewCertInfo(path, cert), Fingerprint: pki.Fingerprint(cert)}
	left := cert.NotAfter.Sub(now)
	cc.DaysLeft = int(left.Hours() / 24)
	if left < 0 {
		cc.DaysLeft = -int((-left).Hours()/24) - 1
	}
	switch {
	case left <= 0:
		cc.Problems = append(cc.Problems, fmt.Sprintf("expired on %s", cert.NotAfter.UTC().Format("2006-01-02")))
	case left < WarnDays*24*time.Hour:
		cc.Problems = append(cc.Problems, fmt.Sprintf("expires in %d days (%s); re-run 'hactl bootstrap' to renew it",
			cc.DaysLeft, cert.NotAfter.UTC().Format("2006-01-02")))
	}
	if err := pki.SignedBy(cert, ca); err != nil {
		cc.Problems = append(cc.Problems, err.Error())
	} else {
		cc.SignedByCA = true
	}
	return cc
}

// SANs returns the certificate's subject alternative names as "DNS:x" and "IP:y".
func (c CertCheck) SANs() []string {
	var out []string
	for _, d := range c.DNSNames {
		out = append(out, "DNS:"+d)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP:"+ip)
	}
	return out
}

type remoteCert struct {
	path string
	cert *x509.Certificate
	err  error
}

// kubeCertFiles are the certificates hactl installs on a control-plane host for kube-apiserver
// (kubeadm's external-etcd paths; the key next to the client certificate is never read).
var kubeCertFiles = []string{kubeadm.EtcdCAFile, kubeadm.EtcdClientCertFile}

// hostCertsCommand returns the command that prints "<path> <base64 of the file>" for every
// certificate of h: each *.crt under etcd.RemotePKIDir (not hidden: no upload temp files) on an etcd
// member, and kubeCertFiles that exist on a control-plane host. Key files are never read.
func hostCertsCommand(h v1alpha1.Host) string {
	var b strings.Builder
	b.WriteString("{ ")
	if h.HasRole(v1alpha1.RoleEtcd) {
		fmt.Fprintf(&b, "if [ -d %[1]s ]; then find %[1]s -type f -name '*.crt' ! -name '.*' | sort; fi; ", shell.Quote(etcd.RemotePKIDir))
	}
	if h.HasRole(v1alpha1.RoleControlPlane) {
		b.WriteString("for f in")
		for _, f := range kubeCertFiles {
			b.WriteString(" " + shell.Quote(f))
		}
		b.WriteString(`; do if [ -f "$f" ]; then echo "$f"; fi; done; `)
	}
	b.WriteString(`} | while read -r f; do printf '%s ' "$f"; base64 -w0 "$f"; echo; done`)
	return b.String()
}

// readHostCerts connects to h and reads its certificates with one command.
func readHostCerts(ctx context.Context, h v1alpha1.Host, d *provision.Dialer, timeout time.Duration, p *ui.Printer) ([]remoteCert, error) {
	cli, err := d.Dial(ctx, provision.TargetOf(h))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, err := cli.Run(sctx, "pki/check", hostCertsCommand(h))
	p.Debugf("%s: [pki/check] read the certificates (%s, err=%v)", h.Name, time.Since(start).Round(time.Millisecond), err)
	if err != nil {
		return nil, err
	}
	return parseHostCerts(res.Stdout), nil
}

// parseHostCerts reads hostCertsCommand's output.
func parseHostCerts(out []byte) []remoteCert {
	var certs []remoteCert
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		path, b64, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		rc := remoteCert{path: path}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err == nil {
			rc.cert, err = pki.ParseCertPEM(raw)
		}
		if err != nil {
			rc.err = fmt.Errorf("cannot be read as a PEM certificate: %v", err)
		}
		certs = append(certs, rc)
	}
	sort.Slice(certs, func(i, j int) bool { return certs[i].path < certs[j].path })
	return certs
}
