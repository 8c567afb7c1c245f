package etcdphases

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/state"
)

// Remote layout on every member (docs/design.md); the etcd package owns the rest of it.
const (
	remoteMarker = etcd.RemoteMarker
	remoteUnit   = etcd.RemoteUnitPath
	remotePKIDir = etcd.RemotePKIDir
)

// DesiredFile is one file a host must have (runctx.DesiredFile).
type DesiredFile = runctx.DesiredFile

// Credentials are the local TLS files hactl uses as an etcd client.
type Credentials struct {
	PKIDir string
	TLS    etcd.TLSFiles
}

// NewCredentials returns the client credentials of the state dir stateDir.
func NewCredentials(stateDir string) *Credentials {
	dir := filepath.Join(stateDir, "pki")
	return &Credentials{PKIDir: dir, TLS: etcd.TLSFiles{
		CA:   pki.CertPath(dir, "ca"),
		Cert: pki.CertPath(dir, pki.HactlClient),
		Key:  pki.KeyPath(dir, pki.HactlClient),
	}}
}

// Ready reports whether the client certificate exists (so a running cluster can be asked).
func (c *Credentials) Ready() bool {
	for _, p := range []string{c.TLS.CA, c.TLS.Cert, c.TLS.Key} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// PKI loads or creates the CA and every certificate in the local state directory, checks every
// member certificate's SANs before anything is distributed, and loads or creates cluster.json.
// During a dry run it writes nothing: missing certificates are reported as "to be created".
type PKI struct{ g *Group }

// Title is PhasePKI.
func (*PKI) Title() string { return PhasePKI }

// Run does the phase's work.
func (ph *PKI) Run(ctx context.Context) error {
	g := ph.g
	p := g.run.Printer
	if err := ph.loadOrNewState(ctx); err != nil {
		return err
	}
	g.creds = NewCredentials(g.run.Spec.Spec.StateDir)
	if g.run.DryRun {
		if _, err := os.Stat(pki.CertPath(g.creds.PKIDir, "ca")); errors.Is(err, fs.ErrNotExist) && g.recovery == nil {
			p.Infof("  a new etcd CA and certificates will be created in %s", g.creds.PKIDir)
		}
		return nil
	}
	ca, created, err := pki.LoadOrCreateCA(g.creds.PKIDir)
	if err != nil {
		return err
	}
	if created {
		p.Infof("  created etcd CA %s", pki.CertPath(g.creds.PKIDir, "ca"))
	}
	for _, m := range g.members {
		dir := pki.MemberDir(g.creds.PKIDir, m.Name)
		changed, err := ca.EnsureMember(g.creds.PKIDir, m.Name, m.addrs())
		if err != nil {
			return fmt.Errorf("%s: certificates: %w", m.Name, err)
		}
		if changed {
			p.Hostf(m.Name, "issued server and peer certificates")
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
	for _, cl := range []struct{ name, cn string }{{pki.HactlClient, pki.HactlClientCN}, {pki.APIServerClient, pki.APIServerClientCN}} {
		if _, err := ca.EnsureClient(g.creds.PKIDir, cl.name, cl.cn); err != nil {
			return fmt.Errorf("client certificate %s: %w", cl.name, err)
		}
	}
	return g.SaveState()
}

// fileSet is the spec's binaries and the remote layout: which files a member gets, and the sha256
// of each local binary, hashed once per run at most (binaries are tens of MiB; every member needs the
// sum) and not at all while the checksum cache vouches for it.
type fileSet struct {
	spec  *v1alpha1.Cluster
	cache *sumcache.Cache

	mu   sync.Mutex
	sums map[string]string // local binary path → sha256
}

func newFileSet(spec *v1alpha1.Cluster, cache *sumcache.Cache) *fileSet {
	return &fileSet{spec: spec, cache: cache, sums: map[string]string{}}
}

// downloadInstall reports whether the etcd binaries come from spec.etcd.download.
func (fs *fileSet) downloadInstall() bool { return fs.spec.Spec.Etcd.Download != nil }

// remotePaths lists every file hactl manages on a member (checksummed by preflight).
func (fs *fileSet) remotePaths() []string {
	paths := []string{remoteUnit, remoteMarker}
	paths = append(paths, fs.remoteBinaries()...)
	for _, n := range []string{"ca.crt", "ca.key", "server.crt", "server.key", "peer.crt", "peer.key"} {
		paths = append(paths, filepath.Join(remotePKIDir, n))
	}
	return paths
}

type binary struct{ local, remote string }

// remoteBinaries lists the etcd binaries installed on every member: those of spec.etcd.binaries, or
// the three of the release tarball for a download install.
func (fs *fileSet) remoteBinaries() []string {
	var out []string
	if fs.downloadInstall() {
		for _, n := range etcdBinaryNames {
			out = append(out, filepath.Join(etcd.RemoteBinDir, n))
		}
		return out
	}
	for _, bin := range fs.binaries() {
		out = append(out, bin.remote)
	}
	return out
}

// binaries are the local binaries uploaded to every member (none for a download install).
func (fs *fileSet) binaries() []binary {
	if fs.downloadInstall() {
		return nil
	}
	bins := fs.spec.Spec.Etcd.Binaries
	var out []binary
	for _, x := range []struct{ local, name string }{{bins.Etcd, "etcd"}, {bins.Etcdctl, "etcdctl"}, {bins.Etcdutl, "etcdutl"}} {
		if x.local != "" {
			out = append(out, binary{local: x.local, remote: filepath.Join(etcd.RemoteBinDir, x.name)})
		}
	}
	return out
}

// binarySum hashes a local binary once per run.
func (fs *fileSet) binarySum(path string) (string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if s, ok := fs.sums[path]; ok {
		return s, nil
	}
	s, err := fs.cache.Sum(path)
	if err != nil {
		return "", err
	}
	fs.sums[path] = s
	return s, nil
}

// memberRecord returns (creating when missing) the state record of m: founding members get the
// founding --initial-cluster; members joining a running cluster get theirs at join time.
func (g *Group) memberRecord(m Member) *state.Member {
	rec := g.st.Members[m.Name]
	if rec == nil {
		rec = &state.Member{InitialCluster: g.FoundingCluster(), InitialClusterState: "new"}
		g.st.Members[m.Name] = rec
	}
	if rec.PeerURL == "" {
		rec.PeerURL, rec.ClientURL = m.PeerURL, m.ClientURL
	}
	return rec
}

// desiredFiles is everything member m must have, with checksums; the unit's --initial-cluster and
// --initial-cluster-state are the ones recorded in rec (so they never change once decided).
func (g *Group) desiredFiles(m Member, rec *state.Member) ([]DesiredFile, error) {
	var files []DesiredFile
	for _, bin := range g.files.binaries() {
		sum, err := g.files.binarySum(bin.local)
		if err != nil {
			return nil, err
		}
		files = append(files, DesiredFile{Path: bin.remote, Mode: 0o755, Local: bin.local, Sum: sum})
	}
	memberDir := pki.MemberDir(g.creds.PKIDir, m.Name)
	certs := []struct {
		local, remote string
		mode          fs.FileMode
	}{
		{pki.CertPath(g.creds.PKIDir, "ca"), "ca.crt", 0o644},
		{pki.KeyPath(g.creds.PKIDir, "ca"), "ca.key", 0o600}, // kept on members as kubeadm does, for recovery
		{pki.CertPath(memberDir, "server"), "server.crt", 0o644},
		{pki.KeyPath(memberDir, "server"), "server.key", 0o600},
		{pki.CertPath(memberDir, "peer"), "peer.crt", 0o644},
		{pki.KeyPath(memberDir, "peer"), "peer.key", 0o600},
	}
	for _, c := range certs {
		f := DesiredFile{Path: filepath.Join(remotePKIDir, c.remote), Mode: c.mode}
		data, err := os.ReadFile(c.local)
		switch {
		case errors.Is(err, fs.ErrNotExist) && g.run.DryRun:
			f.Sum, f.Note = (&recoverer{g}).recoveredFile(m, c.remote)
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", c.local, err)
		default:
			f.Data, f.Sum = data, runctx.Sum(data)
		}
		files = append(files, f)
	}
	u := etcd.NewUnitConfig(g.run.Spec, nil, m.Member, etcd.ClusterState(rec.InitialClusterState), g.st.Token)
	u.InitialCluster = rec.InitialCluster
	unit, err := etcd.RenderUnit(u)
	if err != nil {
		return nil, fmt.Errorf("%s: rendering etcd unit: %w", m.Name, err)
	}
	files = append(files, DesiredFile{Path: remoteUnit, Mode: 0o644, Data: unit, Sum: runctx.Sum(unit)})
	marker, err := etcd.Marker{Cluster: g.run.Spec.Metadata.Name, Token: g.st.Token, Member: m.Name}.File()
	if err != nil {
		return nil, err
	}
	files = append(files, DesiredFile{Path: remoteMarker, Mode: 0o644, Data: marker, Sum: runctx.Sum(marker)})
	return files, nil
}

// UnitFiles returns member m's etcd unit and marker as they render from its current state record
// (a restore installs them with the new token).
func (g *Group) UnitFiles(m Member) ([]provision.File, error) {
	files, err := g.desiredFiles(m, g.st.Members[m.Name])
	if err != nil {
		return nil, err
	}
	var up []provision.File
	for _, f := range files {
		if f.Path == remoteUnit || f.Path == remoteMarker {
			up = append(up, provision.File{Path: f.Path, Mode: f.Mode, Content: f.Data, SHA256: f.Sum})
		}
	}
	return up, nil
}

func (m Member) addrs() []netip.Addr { return m.Addrs() }
