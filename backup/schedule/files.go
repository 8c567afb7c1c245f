package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/specload"
)

// File is one file a member must have.
type File struct {
	// Path is the remote path; Mode its permissions (owner root:root).
	Path string
	Mode fs.FileMode
	// Data is the content, or Local a local file streamed (the binary).
	Data  []byte
	Local string
	// Size and Sum are the content's size and hex sha256.
	Size int64
	Sum  string
	// Secret files are never shown, only named.
	Secret bool
}

// Inputs are what Files needs besides the spec: the schedule and the local sources.
type Inputs struct {
	// Config is the member's schedule (Member set).
	Config Config
	// Binary is the local hactl binary to upload and its sha256 (see BinaryFile).
	Binary File
	// Credentials is the object store's access key (read locally from what the spec names).
	Credentials specload.BackupCredentials
	// Recipients are the spec's resolved age recipients (none: unencrypted).
	Recipients []string
}

// Files returns every file the member of in.Config needs, in upload order (configuration and
// credentials first, units last):
//
//	/usr/local/bin/hactl                     0755  the binary
//	/etc/hactl/backup/cluster.yaml           0600  HostSpec
//	/etc/hactl/backup/credentials            0600  the access key (never on a command line)
//	/etc/hactl/backup/objectstore-ca.crt     0644  with spec.backup.objectStore.tls
//	/etc/hactl/backup/pki/ca.crt             0644  the etcd CA certificate
//	/etc/hactl/backup/pki/hactl-etcd-client.{crt 0644, key 0600}
//	/etc/hactl/backup/schedule.json          0644  Config
//	/etc/systemd/system/hactl-backup.{service,timer} 0644
//	/etc/systemd/system/hactl-backup-agent.service  0644  with Config.Deltas
//
// Local files (CA and client certificate in the state dir, the object store's CA) are read here;
// errors name them.
func Files(c *v1alpha1.Cluster, in Inputs) ([]File, error) {
	spec, err := HostSpec(c, in.Recipients)
	if err != nil {
		return nil, err
	}
	units, err := Render(in.Config, BinaryPath)
	if err != nil {
		return nil, err
	}
	cr := in.Credentials
	for _, v := range []string{cr.AccessKeyID, cr.SecretAccessKey, cr.SessionToken} {
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("spec.backup.objectStore.credentials: a key contains a line break")
		}
	}
	creds := "# Managed by hactl backup schedule: the object store's access key (root only).\naccessKeyID: " + cr.AccessKeyID + "\nsecretAccessKey: " + cr.SecretAccessKey + "\n"
	if cr.SessionToken != "" {
		creds += "sessionToken: " + cr.SessionToken + "\n"
	}
	files := []File{in.Binary, data(SpecPath, 0o600, spec, false), data(CredentialsPath, 0o600, []byte(creds), true)}
	local := func(remote, from string, mode fs.FileMode, secret bool) error {
		b, err := os.ReadFile(from)
		if err != nil {
			return fmt.Errorf("schedule: %w", err)
		}
		files = append(files, data(remote, mode, b, secret))
		return nil
	}
	if t := c.Spec.Backup.ObjectStore.TLS; t != nil {
		if err := local(ObjectStoreCAPath, t.CAFile, 0o644, false); err != nil {
			return nil, err
		}
	}
	pkiDir := filepath.Join(c.Spec.StateDir, "pki")
	for _, f := range []struct {
		remote, local string
		mode          fs.FileMode
	}{
		{pki.CertPath(PKIDir, pki.CABase), pki.CertPath(pkiDir, pki.CABase), 0o644},
		{pki.CertPath(PKIDir, pki.HactlClient), pki.CertPath(pkiDir, pki.HactlClient), 0o644},
		{pki.KeyPath(PKIDir, pki.HactlClient), pki.KeyPath(pkiDir, pki.HactlClient), 0o600},
	} {
		if err := local(f.remote, f.local, f.mode, f.mode == 0o600); err != nil {
			return nil, fmt.Errorf("%w (has `hactl bootstrap` run with this spec's stateDir?)", err)
		}
	}
	files = append(files,
		data(ConfigPath, 0o644, in.Config.Marshal(), false),
		data(ServicePath, 0o644, units.Service, false),
		data(TimerPath, 0o644, units.Timer, false))
	if units.Agent != nil {
		files = append(files, data(AgentServicePath, 0o644, units.Agent, false))
	}
	return files, nil
}

// ManagedPaths are every path Files may return plus the textfile: what --disable removes and what
// the probe checksums.
func ManagedPaths() []string {
	return []string{BinaryPath, SpecPath, CredentialsPath, ObjectStoreCAPath,
		pki.CertPath(PKIDir, pki.CABase), pki.CertPath(PKIDir, pki.HactlClient), pki.KeyPath(PKIDir, pki.HactlClient),
		ConfigPath, ServicePath, TimerPath, AgentServicePath}
}

func data(p string, mode fs.FileMode, b []byte, secret bool) File {
	sum := sha256.Sum256(b)
	return File{Path: p, Mode: mode, Data: b, Size: int64(len(b)), Sum: hex.EncodeToString(sum[:]), Secret: secret}
}

// BinaryFile describes the local hactl binary at local as the file uploaded to BinaryPath (its
// sha256 computed here).
func BinaryFile(local string) (File, error) {
	f, err := os.Open(local)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", local, err)
	}
	return File{Path: BinaryPath, Mode: 0o755, Local: local, Size: n, Sum: hex.EncodeToString(h.Sum(nil))}, nil
}

// HostSpec renders the minimal spec a member's runs load (SpecPath): the cluster's name, its etcd
// members (name, address, zone, role etcd) and client port, stateDir ConfigDir (so the etcd CA and
// hactl's client certificate are PKIDir's), and spec.backup with its credentials pointing at
// CredentialsPath, its CA at ObjectStoreCAPath and the age recipients inline. It names nothing of
// this machine: no SSH keys (spec.ssh is a placeholder: the runs never use SSH), no bastion, no
// load balancer, no local paths. The result is checked to load as a valid spec.
func HostSpec(c *v1alpha1.Cluster, recipients []string) ([]byte, error) {
	if c.Spec.Backup == nil {
		return nil, fmt.Errorf("spec.backup is not set")
	}
	e := c.Spec.Etcd
	hc := v1alpha1.Cluster{
		APIVersion: v1alpha1.APIVersion,
		Kind:       v1alpha1.Kind,
		Metadata:   c.Metadata,
		Spec: v1alpha1.ClusterSpec{
			StateDir: ConfigDir,
			SSH: v1alpha1.SSH{User: "root", Agent: v1alpha1.AgentNever, IdentityFile: "/nonexistent/not-used",
				KnownHostsFile: "/nonexistent/not-used"},
			Etcd: v1alpha1.Etcd{
				Version: e.Version, Binaries: v1alpha1.EtcdBinaries{Etcd: "/usr/local/bin/etcd"},
				DataDir: e.DataDir, ClientPort: e.ClientPort, PeerPort: e.PeerPort,
				HeartbeatInterval: e.HeartbeatInterval, ElectionTimeout: e.ElectionTimeout,
				QuotaBackendBytes: e.QuotaBackendBytes, AutoCompaction: e.AutoCompaction,
				AcceptZoneQuorumLoss: e.AcceptZoneQuorumLoss,
			},
		},
	}
	for _, h := range c.EtcdHosts() {
		hc.Spec.Hosts = append(hc.Spec.Hosts, v1alpha1.Host{Name: h.Name, Address: h.Address, Zone: h.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	}
	b := *c.Spec.Backup
	b.ObjectStore.Credentials = v1alpha1.ObjectStoreCredentials{File: CredentialsPath}
	if b.ObjectStore.TLS != nil {
		b.ObjectStore.TLS = &v1alpha1.ObjectStoreTLS{CAFile: ObjectStoreCAPath}
	}
	b.Encryption = nil
	if len(recipients) > 0 {
		b.Encryption = &v1alpha1.BackupEncryption{Recipients: recipients}
	}
	hc.Spec.Backup = &b
	out, err := yaml.Marshal(&hc)
	if err != nil {
		return nil, fmt.Errorf("host spec: %w", err)
	}
	hdr := "# Managed by hactl backup schedule: the spec the scheduled backups of this member load.\n" +
		"# spec.ssh is a placeholder: the runs talk to etcd and the object store only.\n"
	out = append([]byte(hdr), out...)
	if _, _, err := specload.Decode(out, SpecPath, path.Dir(SpecPath)); err != nil {
		return nil, fmt.Errorf("host spec (a bug): %w", err)
	}
	return out, nil
}
