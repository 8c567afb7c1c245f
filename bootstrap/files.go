package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/state"
)

// Remote layout on every member (docs/design.md); the etcd package owns the rest of it.
const (
	remoteMarker  = "/etc/hactl/etcd-member.json"
	remoteUnit    = etcd.RemoteUnitPath
	remotePKIDir  = etcd.RemotePKIDir
	clientCertTag = "hactl-etcd-client"
	apiserverTag  = "apiserver-etcd-client"
)

// desiredFile is one file a member must have.
type desiredFile struct {
	Path  string
	Mode  fs.FileMode
	Local string // local file to stream (binaries); empty when Data is set
	Data  []byte
	Sum   string // sha256 hex; empty when not known yet (dry run before the PKI exists)
	Note  string // why it changes, for the plan
}

// credentials are the local TLS files hactl uses as an etcd client.
type credentials struct {
	pkiDir string
	tls    etcd.TLSFiles
}

func newCredentials(stateDir string) *credentials {
	dir := filepath.Join(stateDir, "pki")
	return &credentials{pkiDir: dir, tls: etcd.TLSFiles{
		CA:   pki.CertPath(dir, "ca"),
		Cert: pki.CertPath(dir, clientCertTag),
		Key:  pki.KeyPath(dir, clientCertTag),
	}}
}

// ready reports whether the client certificate exists (so a running cluster can be asked).
func (c *credentials) ready() bool {
	for _, p := range []string{c.tls.CA, c.tls.Cert, c.tls.Key} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// pki loads or creates the CA and every certificate in the local state directory, checks every
// member certificate's SANs before anything is distributed, and loads or creates cluster.json.
// During a dry run it writes nothing: missing certificates are reported as "to be created".
func (b *Bootstrapper) pki(ctx context.Context) error {
	if err := b.loadOrNewState(ctx); err != nil {
		return err
	}
	b.creds = newCredentials(b.spec.Spec.StateDir)
	if b.opt.DryRun {
		if _, err := os.Stat(pki.CertPath(b.creds.pkiDir, "ca")); errors.Is(err, fs.ErrNotExist) && b.recovery == nil {
			b.p.Infof("  a new etcd CA and certificates will be created in %s", b.creds.pkiDir)
		}
		return nil
	}
	ca, created, err := pki.LoadOrCreateCA(b.creds.pkiDir)
	if err != nil {
		return err
	}
	if created {
		b.p.Infof("  created etcd CA %s", pki.CertPath(b.creds.pkiDir, "ca"))
	}
	for _, m := range b.members {
		dir := pki.MemberDir(b.creds.pkiDir, m.Name)
		changed, err := ca.EnsureMember(b.creds.pkiDir, m.Name, m.addrs())
		if err != nil {
			return fmt.Errorf("%s: certificates: %w", m.Name, err)
		}
		if changed {
			b.p.Hostf(m.Name, "issued server and peer certificates")
		}
		for _, kind := range []string{"server", "peer"} {
			cert, err := pki.ReadCert(pki.CertPath(dir, kind))
			if err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if err := pki.CheckSANs(cert, m.Name, m.addrs()); err != nil {
				return fmt.Errorf("%s: %s certificate: %w", m.Name, kind, err)
			}
		}
	}
	for _, cl := range []struct{ name, cn string }{{clientCertTag, "hactl"}, {apiserverTag, "kube-apiserver-etcd-client"}} {
		if _, err := ca.EnsureClient(b.creds.pkiDir, cl.name, cl.cn); err != nil {
			return fmt.Errorf("client certificate %s: %w", cl.name, err)
		}
	}
	if err := state.Save(b.spec.Spec.StateDir, b.st); err != nil {
		return err
	}
	return nil
}

// remotePaths lists every file hactl manages on a member (checksummed by preflight).
func (b *Bootstrapper) remotePaths() []string {
	paths := []string{remoteUnit, remoteMarker}
	paths = append(paths, b.remoteBinaries()...)
	for _, n := range []string{"ca.crt", "ca.key", "server.crt", "server.key", "peer.crt", "peer.key"} {
		paths = append(paths, filepath.Join(remotePKIDir, n))
	}
	return paths
}

type binary struct{ local, remote string }

// remoteBinaries lists the etcd binaries installed on every member: those of spec.etcd.binaries, or
// the three of the release tarball for a download install.
func (b *Bootstrapper) remoteBinaries() []string {
	var out []string
	if b.downloadInstall() {
		for _, n := range etcdBinaryNames {
			out = append(out, filepath.Join(etcd.RemoteBinDir, n))
		}
		return out
	}
	for _, bin := range b.binaries() {
		out = append(out, bin.remote)
	}
	return out
}

// binaries are the local binaries uploaded to every member (none for a download install).
func (b *Bootstrapper) binaries() []binary {
	if b.downloadInstall() {
		return nil
	}
	bins := b.spec.Spec.Etcd.Binaries
	var out []binary
	for _, x := range []struct{ local, name string }{{bins.Etcd, "etcd"}, {bins.Etcdctl, "etcdctl"}, {bins.Etcdutl, "etcdutl"}} {
		if x.local != "" {
			out = append(out, binary{local: x.local, remote: filepath.Join(etcd.RemoteBinDir, x.name)})
		}
	}
	return out
}

// memberRecord returns (creating when missing) the state record of m: founding members get the
// founding --initial-cluster; members joining a running cluster get theirs at join time.
func (b *Bootstrapper) memberRecord(m member) *state.Member {
	rec := b.st.Members[m.Name]
	if rec == nil {
		rec = &state.Member{InitialCluster: b.foundingCluster(), InitialClusterState: "new"}
		b.st.Members[m.Name] = rec
	}
	if rec.PeerURL == "" {
		rec.PeerURL, rec.ClientURL = m.peerURL, m.clientURL
	}
	return rec
}

// unitConfig is every etcd setting of member m, rendered as flags of the systemd unit; the
// --initial-cluster and --initial-cluster-state are the ones recorded for m (so they never change
// once decided).
func (b *Bootstrapper) unitConfig(m member, rec *state.Member) etcd.UnitConfig {
	u := etcd.NewUnitConfig(b.spec, nil, m.Member, etcd.ClusterState(rec.InitialClusterState), b.st.Token)
	u.InitialCluster = rec.InitialCluster
	return u
}

// desiredFiles is everything member m must have, with checksums.
func (b *Bootstrapper) desiredFiles(m member, rec *state.Member) ([]desiredFile, error) {
	var files []desiredFile
	for _, bin := range b.binaries() {
		sum, err := b.binarySum(bin.local)
		if err != nil {
			return nil, err
		}
		files = append(files, desiredFile{Path: bin.remote, Mode: 0o755, Local: bin.local, Sum: sum})
	}
	memberDir := pki.MemberDir(b.creds.pkiDir, m.Name)
	certs := []struct {
		local, remote string
		mode          fs.FileMode
	}{
		{pki.CertPath(b.creds.pkiDir, "ca"), "ca.crt", 0o644},
		{pki.KeyPath(b.creds.pkiDir, "ca"), "ca.key", 0o600}, // kept on members as kubeadm does, for recovery
		{pki.CertPath(memberDir, "server"), "server.crt", 0o644},
		{pki.KeyPath(memberDir, "server"), "server.key", 0o600},
		{pki.CertPath(memberDir, "peer"), "peer.crt", 0o644},
		{pki.KeyPath(memberDir, "peer"), "peer.key", 0o600},
	}
	for _, c := range certs {
		f := desiredFile{Path: filepath.Join(remotePKIDir, c.remote), Mode: c.mode}
		data, err := os.ReadFile(c.local)
		switch {
		case errors.Is(err, fs.ErrNotExist) && b.opt.DryRun:
			f.Sum, f.Note = b.recoveredFile(m, c.remote)
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", c.local, err)
		default:
			f.Data, f.Sum = data, sum(data)
		}
		files = append(files, f)
	}
	unit, err := etcd.RenderUnit(b.unitConfig(m, rec))
	if err != nil {
		return nil, fmt.Errorf("%s: rendering etcd unit: %w", m.Name, err)
	}
	files = append(files, desiredFile{Path: remoteUnit, Mode: 0o644, Data: unit, Sum: sum(unit)})
	marker, err := json.MarshalIndent(Marker{Cluster: b.spec.Metadata.Name, Token: b.st.Token, Member: m.Name}, "", "  ")
	if err != nil {
		return nil, err
	}
	marker = append(marker, '\n')
	files = append(files, desiredFile{Path: remoteMarker, Mode: 0o644, Data: marker, Sum: sum(marker)})
	return files, nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// binarySum hashes a local binary once per run (binaries are tens of MiB; every member needs the sum).
func (b *Bootstrapper) binarySum(path string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.sums[path]; ok {
		return s, nil
	}
	s, err := fileSum(path)
	if err != nil {
		return "", err
	}
	b.sums[path] = s
	return s, nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (m member) addrs() []netip.Addr { return []netip.Addr{m.Address} }
