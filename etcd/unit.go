package etcd

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"time"

	"github.com/hactl/hactl/api/limits"
	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/templates"
)

// Remote layout on a member (docs/design.md).
const (
	RemoteBinDir      = "/usr/local/bin"
	RemoteEtcdBinary  = RemoteBinDir + "/etcd"
	RemotePKIDir      = "/etc/etcd/pki"
	RemoteCACert      = RemotePKIDir + "/ca.crt"
	RemoteServerCert  = RemotePKIDir + "/server.crt"
	RemoteServerKey   = RemotePKIDir + "/server.key"
	RemotePeerCert    = RemotePKIDir + "/peer.crt"
	RemotePeerKey     = RemotePKIDir + "/peer.key"
	RemoteUnitPath    = "/etc/systemd/system/etcd.service"
	UnitName          = "etcd.service"
	MetricsPort       = limits.EtcdMetricsPort // etcd's (and kubeadm's) usual metrics port, plain HTTP on loopback
	DefaultRestartSec = 5 * time.Second
	// TLSMinVersion is etcd's --tls-min-version.
	TLSMinVersion = "TLS1.2"
)

// ClusterState is etcd's --initial-cluster-state.
type ClusterState string

// Cluster states.
const (
	// StateNew: the member is part of a cluster being formed now (all members start together).
	StateNew ClusterState = "new"
	// StateExisting: the member joins a running cluster (after `member add`).
	StateExisting ClusterState = "existing"
)

// UnitConfig is every setting of one etcd member's systemd unit. Each field maps to one etcd flag
// (named in the comment) except Binary and RestartSec. RenderUnit writes them all to ExecStart.
type UnitConfig struct {
	Binary string // ExecStart program, e.g. /usr/local/bin/etcd

	Name                     string       // --name
	DataDir                  string       // --data-dir (absolute)
	ListenClientURLs         []string     // --listen-client-urls: https://<addr>:<port> and loopback
	AdvertiseClientURLs      []string     // --advertise-client-urls
	ListenPeerURLs           []string     // --listen-peer-urls
	InitialAdvertisePeerURLs []string     // --initial-advertise-peer-urls
	InitialCluster           string       // --initial-cluster (see InitialCluster)
	InitialClusterState      ClusterState // --initial-cluster-state: new | existing
	InitialClusterToken      string       // --initial-cluster-token

	ClientCertAuth bool   // --client-cert-auth
	TrustedCAFile  string // --trusted-ca-file
	CertFile       string // --cert-file
	KeyFile        string // --key-file

	PeerClientCertAuth bool   // --peer-client-cert-auth
	PeerTrustedCAFile  string // --peer-trusted-ca-file
	PeerCertFile       string // --peer-cert-file
	PeerKeyFile        string // --peer-key-file

	HeartbeatIntervalMs int64 // --heartbeat-interval, milliseconds
	ElectionTimeoutMs   int64 // --election-timeout, milliseconds

	QuotaBackendBytes       int64  // --quota-backend-bytes, bytes
	AutoCompactionMode      string // --auto-compaction-mode: periodic | revision
	AutoCompactionRetention string // --auto-compaction-retention

	ListenMetricsURLs []string // --listen-metrics-urls, e.g. http://127.0.0.1:2381
	Logger            string   // --logger: zap
	LogOutputs        []string // --log-outputs: stderr (systemd forwards it to the journal)
	TLSMinVersion     string   // --tls-min-version: TLS1.2 | TLS1.3

	RestartSec time.Duration // systemd RestartSec=, whole seconds
}

// NewUnitConfig returns the unit settings of member self in the cluster spec c: members is the
// member list the unit's --initial-cluster names (for StateNew all members; for StateExisting the
// running members plus self), token the cluster token. Certificates are those of the remote layout
// (RemotePKIDir). c must be defaulted.
func NewUnitConfig(c *v1alpha1.Cluster, members []Member, self Member, state ClusterState, token string) UnitConfig {
	e := c.Spec.Etcd
	lo := Loopback(self.Address)
	return UnitConfig{
		Binary:                   RemoteEtcdBinary,
		Name:                     self.Name,
		DataDir:                  e.DataDir,
		ListenClientURLs:         []string{self.ClientURL(), URL("https", lo, self.ClientPort)},
		AdvertiseClientURLs:      []string{self.ClientURL()},
		ListenPeerURLs:           []string{self.PeerURL()},
		InitialAdvertisePeerURLs: []string{self.PeerURL()},
		InitialCluster:           InitialCluster(members),
		InitialClusterState:      state,
		InitialClusterToken:      token,
		ClientCertAuth:           true,
		TrustedCAFile:            RemoteCACert,
		CertFile:                 RemoteServerCert,
		KeyFile:                  RemoteServerKey,
		PeerClientCertAuth:       true,
		PeerTrustedCAFile:        RemoteCACert,
		PeerCertFile:             RemotePeerCert,
		PeerKeyFile:              RemotePeerKey,
		HeartbeatIntervalMs:      e.HeartbeatInterval.Milliseconds(),
		ElectionTimeoutMs:        e.ElectionTimeout.Milliseconds(),
		QuotaBackendBytes:        e.QuotaBackendBytes,
		AutoCompactionMode:       e.AutoCompaction.Mode,
		AutoCompactionRetention:  e.AutoCompaction.Retention,
		ListenMetricsURLs:        metricsURLs(e.MetricsAddress, self.Address),
		Logger:                   "zap",
		LogOutputs:               []string{"stderr"},
		TLSMinVersion:            TLSMinVersion,
		RestartSec:               DefaultRestartSec,
	}
}

// metricsURLs returns --listen-metrics-urls for spec.etcd.metricsAddress: loopback always, then the
// member's own address ("host") or the unspecified address ("0.0.0.0", "::"), which already covers
// loopback. member is the member's address as in the spec.
func metricsURLs(metricsAddress string, member netip.Addr) []string {
	lo := URL("http", netip.AddrFrom4([4]byte{127, 0, 0, 1}), MetricsPort)
	switch metricsAddress {
	case v1alpha1.MetricsAddressHost:
		return []string{lo, URL("http", member, MetricsPort)}
	case "0.0.0.0", "::":
		return []string{URL("http", netip.MustParseAddr(metricsAddress), MetricsPort)}
	}
	return []string{lo}
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Validate checks that every setting is present and in etcd's accepted range (embed.Config.Validate:
// election timeout at least limits.MinElectionHeartbeatRatio x heartbeat and at most
// limits.MaxElectionTimeout). It returns every problem found, joined (errors.Join) and wrapped with
// the member name.
func (u UnitConfig) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	req := func(flag, v string) {
		if v == "" {
			add("%s is empty", flag)
		}
	}
	abs := func(flag, v string) {
		if !path.IsAbs(v) {
			add("%s %q is not an absolute path", flag, v)
		}
	}
	reqList := func(flag string, v []string) {
		if len(v) == 0 || slices.Contains(v, "") {
			add("%s is empty", flag)
		}
	}
	if !labelRE.MatchString(u.Name) {
		add("--name %q is not an RFC 1123 label", u.Name)
	}
	abs("binary", u.Binary)
	abs("--data-dir", u.DataDir)
	reqList("--listen-client-urls", u.ListenClientURLs)
	reqList("--advertise-client-urls", u.AdvertiseClientURLs)
	reqList("--listen-peer-urls", u.ListenPeerURLs)
	reqList("--initial-advertise-peer-urls", u.InitialAdvertisePeerURLs)
	req("--initial-cluster", u.InitialCluster)
	if u.InitialClusterState != StateNew && u.InitialClusterState != StateExisting {
		add("--initial-cluster-state %q is not new or existing", u.InitialClusterState)
	}
	req("--initial-cluster-token", u.InitialClusterToken)
	abs("--trusted-ca-file", u.TrustedCAFile)
	abs("--cert-file", u.CertFile)
	abs("--key-file", u.KeyFile)
	abs("--peer-trusted-ca-file", u.PeerTrustedCAFile)
	abs("--peer-cert-file", u.PeerCertFile)
	abs("--peer-key-file", u.PeerKeyFile)
	if u.HeartbeatIntervalMs <= 0 {
		add("--heartbeat-interval must be positive")
	}
	if maxMs := limits.MaxElectionTimeout.Milliseconds(); u.ElectionTimeoutMs < limits.MinElectionHeartbeatRatio*u.HeartbeatIntervalMs || u.ElectionTimeoutMs > maxMs {
		add("--election-timeout %dms must be at least %d x heartbeat (%dms) and at most %dms", u.ElectionTimeoutMs, limits.MinElectionHeartbeatRatio, u.HeartbeatIntervalMs, maxMs)
	}
	if u.QuotaBackendBytes < 0 {
		add("--quota-backend-bytes is negative")
	}
	if u.AutoCompactionMode != "periodic" && u.AutoCompactionMode != "revision" {
		add("--auto-compaction-mode %q is not periodic or revision", u.AutoCompactionMode)
	}
	req("--auto-compaction-retention", u.AutoCompactionRetention)
	reqList("--listen-metrics-urls", u.ListenMetricsURLs)
	req("--logger", u.Logger)
	reqList("--log-outputs", u.LogOutputs)
	if u.TLSMinVersion != "TLS1.2" && u.TLSMinVersion != "TLS1.3" {
		add("--tls-min-version %q is not TLS1.2 or TLS1.3", u.TLSMinVersion)
	}
	if u.RestartSec < time.Second || u.RestartSec%time.Second != 0 {
		add("RestartSec %s is not a whole number of seconds >= 1s", u.RestartSec)
	}
	if len(errs) > 0 {
		return fmt.Errorf("etcd unit for %q: %w", u.Name, errors.Join(errs...))
	}
	return nil
}

// unitData is what etcd.service.tmpl sees: the config plus systemd-formatted values.
type unitData struct {
	UnitConfig
	RestartSec string
}

// RenderUnit validates u and renders etcd.service: Type=notify, every etcd setting a flag of
// ExecStart in a fixed order (no config file, no environment), Restart=on-failure. The output is
// deterministic: equal configs give equal bytes.
func RenderUnit(u UnitConfig) ([]byte, error) {
	if err := u.Validate(); err != nil {
		return nil, err
	}
	return templates.Render("etcd.service.tmpl", unitData{
		UnitConfig: u,
		RestartSec: fmt.Sprintf("%ds", int64(u.RestartSec/time.Second)),
	})
}
