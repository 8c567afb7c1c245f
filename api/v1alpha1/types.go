// Package v1alpha1 holds hactl's cluster spec (apiVersion hactl.io/v1alpha1, kind Cluster): its types,
// strict decoding from bytes (unknown fields and wrong types named with field path and line),
// defaulting and validation. It is a leaf and pure: no file, environment or network access, and no
// hactl package but the constants of api/limits. Reading a spec file, checking the local files it
// names and reading the secrets it names belong to specload; the VRRP failover proof to lb (passed
// to Validate as a FailoverRule).
package v1alpha1

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Group, Version and Kind identify the spec document.
const (
	APIVersion = "hactl.io/v1alpha1"
	Kind       = "Cluster"
)

// Role is a host's job in the cluster.
type Role string

// Roles a host may carry.
const (
	RoleEtcd         Role = "etcd"          // an etcd member
	RoleControlPlane Role = "control-plane" // runs kube-apiserver (a Kubernetes node with spec.kubernetes)
	RoleLB           Role = "lb"            // runs HAProxy + Keepalived (later issues)
)

// Cluster is the whole spec document.
type Cluster struct {
	// APIVersion is hactl.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind is Cluster.
	Kind string `json:"kind"`
	// Metadata names the cluster.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is everything hactl builds.
	Spec ClusterSpec `json:"spec"`

	// lines maps field paths to lines of the document the Cluster was decoded from (nil when built
	// in code), so later checks (specload.ValidateLocalFiles) can point at the line too.
	lines map[string]int
	// explicitZeros are the fields the document set to 0 (or a zero duration), which defaulting
	// cannot tell from absent ones.
	explicitZeros []zeroField
}

// ValidationError wraps errs, found by a check run after Decode (e.g. specload.ValidateLocalFiles), in
// a *ValidationError whose lines carry "source:line:" like Decode's own errors; it returns nil when
// errs is empty.
func (c *Cluster) ValidationError(source string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Source: source, Errors: errs, lines: c.lines}
}

// ObjectMeta names the cluster.
type ObjectMeta struct {
	// Name is an RFC 1123 label; it prefixes the etcd cluster token and names the cluster in state.
	Name string `json:"name"`
}

// ClusterSpec is everything hactl needs to build the cluster.
type ClusterSpec struct {
	// StateDir is the local directory holding the PKI and cluster state (cluster.json).
	// A relative path is resolved against the spec file's directory; "~" is expanded.
	StateDir string `json:"stateDir,omitempty"`
	// SSH is how hactl reaches every host (hosts[*].ssh overrides it per host).
	SSH SSH `json:"ssh"`
	// Hosts are the machines: etcd members, control planes, workers and LB hosts, by role; 3 or 5
	// members spread over availability zones.
	Hosts []Host `json:"hosts"`
	// Etcd configures the etcd members.
	Etcd Etcd `json:"etcd"`
	// LoadBalancer puts HAProxy + Keepalived (a VRRP VIP) in front of the kube-apiservers, or names
	// the user's own load balancer (external); nil when the spec has no load balancer.
	LoadBalancer *LoadBalancer `json:"loadBalancer,omitempty"`
	// Kubernetes is the cluster kubeadm builds on etcd and the VIP (types_kube.go); nil: hactl
	// builds etcd and the load balancer only.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	// Scheduler is hactl-scheduler, deployed by `hactl scheduler deploy` (types_scheduler.go); nil:
	// no custom scheduler.
	Scheduler *Scheduler `json:"scheduler,omitempty"`
	// Backup is where `hactl backup` stores etcd snapshots (types_backup.go); nil when the spec
	// has no backup.
	Backup *Backup `json:"backup,omitempty"`
}

// LoadBalancer is the kube-apiserver load balancer: HAProxy on every LB host (hosts with role lb, or
// the control-plane hosts when co-located) and Keepalived moving a VIP between them (VRRP, RFC 5798);
// or, with External, a load balancer the user runs, of which hactl installs nothing.
type LoadBalancer struct {
	// External is a load balancer hactl does not run (a cloud load balancer, an F5, your own
	// HAProxy): hactl installs no HAProxy or Keepalived, uses address:port as kubeadm's
	// controlPlaneEndpoint and in kubeconfigs, and `hactl status` and `hactl drill lb-failover`
	// probe GET /readyz through it. Its backends are the control-plane hosts at apiServerPort. Only
	// apiServerPort and healthCheck.caFile may be set beside it: every other field configures
	// HAProxy or Keepalived.
	External *ExternalLoadBalancer `json:"external,omitempty"`
	// VIP is the virtual IP with its prefix length, e.g. "172.28.0.100/24" (CIDR notation);
	// required unless external is set.
	VIP string `json:"vip,omitempty"`
	// Interface is the network interface carrying the VIP; empty: detected on each host as the
	// interface whose subnet contains the VIP.
	Interface string `json:"interface,omitempty"`
	// VirtualRouterID is keepalived's virtual_router_id, 1-255, unique on the L2 segment (default 51).
	VirtualRouterID int `json:"virtualRouterID,omitempty"`
	// Mode is "unicast" (default; works where multicast is blocked) or "multicast".
	Mode string `json:"mode,omitempty"`
	// AdvertInterval is the VRRP advertisement interval (default 500ms, VRRPv3; 1s, VRRPv2, when auth
	// is set on an IPv4 VIP). Whole seconds run VRRPv2 for an IPv4 VIP; hundredths of a second from
	// 100ms (e.g. 500ms) run VRRPv3, which has no auth.
	// The VIP leaves a dead holder after about 3 intervals (RFC 5798's master-down interval).
	AdvertInterval Duration `json:"advertInterval,omitzero"`
	// Auth is an optional VRRP PASS authentication secret (plaintext on the wire in VRRPv2; off by
	// default), read from a file or an environment variable, never inline; at most 8 characters.
	Auth *VRRPAuth `json:"auth,omitempty"`
	// Priorities maps LB host name to VRRP priority (1-254); empty: computed from host order
	// (first host highest). Overrides are validated the same way (the VIP must be able to move).
	Priorities map[string]int `json:"priorities,omitempty"`
	// Nopreempt keeps the VIP on the host holding it when a host with a higher priority comes back
	// (keepalived's nopreempt): fewer moves, but the VIP no longer goes back to the preferred host.
	// It needs CheckWeight 0 (the default): with a weighted check, a holder whose HAProxy failed would
	// only lower its priority, and without preemption nobody would take the VIP from it.
	Nopreempt bool `json:"nopreempt,omitempty"`
	// CheckWeight is the weight of keepalived's check of the local HAProxy (vrrp_script weight,
	// -253..253). 0 (the default, DefaultCheckWeight): a failed check puts the host into FAULT state,
	// which releases the VIP at once; the price is that no host holds the VIP while every host's
	// check fails. Other values are validated (the VIP must leave a failed host); then the backup
	// takes over only when its master-down interval runs out (3 x advertInterval + skew), but a VIP
	// stays up when every check fails.
	CheckWeight *int `json:"checkWeight,omitempty"`
	// CheckFall is how many failed checks of the local HAProxy in a row (one a second, each given
	// 2 s) count as a failure (vrrp_script fall; default 1, DefaultCheckFall). 1 moves the VIP about
	// 1 s after HAProxy stops; each more costs a second, and tolerates one more slow check.
	CheckFall int `json:"checkFall,omitempty"`
	// Topology is "dedicated" (default: hosts with role lb) or "colocated" (on the control-plane
	// hosts; then FrontendPort must differ from APIServerPort).
	Topology string `json:"topology,omitempty"`
	// FrontendPort is the port HAProxy listens on at the VIP (default 6443).
	FrontendPort int `json:"frontendPort,omitempty"`
	// APIServerPort is the kube-apiserver port on the control-plane hosts (default 6443).
	APIServerPort int `json:"apiServerPort,omitempty"`
	// HealthCheck tunes HAProxy's backend checks (GET /readyz over TLS expecting 200).
	HealthCheck LBHealthCheck `json:"healthCheck,omitempty"`
}

// ExternalLoadBalancer is a TCP (layer 4) load balancer the user runs in front of the control-plane
// hosts' kube-apiservers, passing TLS through to them (kubeadm's "external load balancer"; see
// docs/real-hosts.md for what it must do).
type ExternalLoadBalancer struct {
	// Address is the load balancer's DNS name or IP address as every node and client reaches it,
	// without scheme, port or brackets, e.g. "api.prod.example.com" or "10.0.0.100". kubeadm puts it
	// in the kube-apiserver certificate's SANs.
	Address string `json:"address"`
	// Port is the load balancer's frontend port (default 6443).
	Port int `json:"port,omitempty"`
}

// VRRPAuth names where the VRRP auth secret comes from: exactly one of File and Env.
type VRRPAuth struct {
	// File is a local file holding the secret (mode 0600 or stricter).
	File string `json:"file,omitempty"`
	// Env names an environment variable holding the secret.
	Env string `json:"env,omitempty"`
}

// LBHealthCheck is HAProxy's backend health check.
type LBHealthCheck struct {
	// Interval is HAProxy's "inter" (default 2s).
	Interval Duration `json:"interval,omitzero"`
	// Fall is how many failed checks mark a backend DOWN (default 3).
	Fall int `json:"fall,omitempty"`
	// Rise is how many passed checks mark it UP again (default 2).
	Rise int `json:"rise,omitempty"`
	// CAFile is a local CA bundle the apiservers' certificates are verified against; empty:
	// "verify none" (the plan says so).
	CAFile string `json:"caFile,omitempty"`
}

// SSH holds how hactl reaches every host.
type SSH struct {
	// User is the remote login user (default root). A non-root user needs sudo (see Sudo).
	User string `json:"user,omitempty"`
	// Port is the default SSH port for hosts that set none (default 22).
	Port int `json:"port,omitempty"`
	// IdentityFile is a local private key file (must not be group/world readable; may be encrypted).
	// The first key file tried (agent keys, when the agent is used, come before it). Optional when
	// the agent may be used (Agent auto or required).
	IdentityFile string `json:"identityFile,omitempty"`
	// IdentityFiles are more local private key files, tried in order after IdentityFile.
	IdentityFiles []string `json:"identityFiles,omitempty"`
	// PassphraseEnv names an environment variable holding the passphrase of encrypted key files
	// (never the passphrase itself). Unset: hactl prompts on a terminal, or fails saying so.
	PassphraseEnv string `json:"passphraseEnv,omitempty"`
	// Agent selects ssh-agent use (SSH_AUTH_SOCK): "auto" (default: used when SSH_AUTH_SOCK is set,
	// its keys tried before key files), "never", or "required" (fail when no agent answers).
	Agent string `json:"agent,omitempty"`
	// KnownHostsFile is the local known_hosts file host keys are verified against
	// (default ~/.ssh/known_hosts).
	KnownHostsFile string `json:"knownHostsFile,omitempty"`
	// ConnectTimeout bounds dialing and the SSH handshake (default 10s).
	ConnectTimeout Duration `json:"connectTimeout,omitzero"`
	// CommandTimeout bounds one remote step (default 2m).
	CommandTimeout Duration `json:"commandTimeout,omitzero"`
	// MaxParallel caps how many hosts are worked on at once (default 10).
	MaxParallel int `json:"maxParallel,omitempty"`
	// Sudo configures privilege escalation for a non-root User.
	Sudo Sudo `json:"sudo,omitempty"`
	// Bastion is a jump host every host is reached through (one shared connection), or nil.
	Bastion *Bastion `json:"bastion,omitempty"`
}

// Sudo configures how a non-root user gains root on the hosts.
type Sudo struct {
	// PasswordEnv names an environment variable holding the sudo password (never the password
	// itself). Unset: passwordless sudo is expected, else hactl prompts on a terminal or fails.
	PasswordEnv string `json:"passwordEnv,omitempty"`
}

// Bastion is an SSH jump host (like OpenSSH's ProxyJump). Its host key is verified like any host's.
type Bastion struct {
	// Address is the bastion's IP address or DNS name as reachable from this machine.
	Address string `json:"address"`
	// Port is its SSH port (default 22).
	Port int `json:"port,omitempty"`
	// User is the login user on the bastion (default spec.ssh.user).
	User string `json:"user,omitempty"`
	// IdentityFile is the bastion's own key file (default: the keys of spec.ssh).
	IdentityFile string `json:"identityFile,omitempty"`
	// KnownHostsFile holds the bastion's host key (default spec.ssh.knownHostsFile); it must hold an
	// entry for the bastion (accepting a bastion's key blindly is never done).
	KnownHostsFile string `json:"knownHostsFile,omitempty"`
}

// Host is one machine reached over SSH.
type Host struct {
	// Name is an RFC 1123 label, unique in the spec; it is the etcd member name.
	Name string `json:"name"`
	// Address is an IPv4 or IPv6 literal, unique in the spec; it is canonicalised by Default. hactl
	// dials it over SSH, and it is the etcd members' client URL, the kube-apiserver's advertise
	// address and the load balancer's backend.
	Address string `json:"address"`
	// PrivateAddress is the host's address on the cluster's own network when that differs from
	// Address (k0sctl's privateAddress), e.g. a management or public address in Address and the
	// back-end network's in PrivateAddress: etcd's peer traffic (peer URLs, --initial-cluster) and
	// kubelet (--node-ip, the node's InternalIP) use it, and the member's certificates and the
	// kube-apiserver's carry it as a SAN too. An IP literal on one of the host's interfaces (the
	// preflight checks it), unique in the spec; empty: Address.
	PrivateAddress string `json:"privateAddress,omitempty"`
	// Port is the SSH port (default spec.ssh.port). ssh.port says the same; set one of the two.
	Port int `json:"port,omitempty"`
	// Zone is the availability zone label (e.g. az-a).
	Zone string `json:"zone"`
	// Roles lists what runs on the host.
	Roles []Role `json:"roles"`
	// SSH overrides spec.ssh for this host: its login user, key file and port. nil: spec.ssh's.
	SSH *HostSSH `json:"ssh,omitempty"`
}

// HostSSH is how one host is reached when it differs from spec.ssh (k0sctl's per-host ssh): a host
// with another login user, key or jump host. Precedence, for each field: hosts[*].ssh, then
// hosts[*].port for the port, then spec.ssh. Everything else (agent, known_hosts, sudo, timeouts) is
// spec.ssh's.
type HostSSH struct {
	// User is the login user on this host (default spec.ssh.user). A non-root user needs sudo, as
	// spec.ssh.sudo configures (the password, if any, is the same on every host).
	User string `json:"user,omitempty"`
	// IdentityFile is a local private key file for this host (mode 0600; may be encrypted, with
	// spec.ssh.passphraseEnv's passphrase), offered before spec.ssh's keys and the agent's.
	IdentityFile string `json:"identityFile,omitempty"`
	// Port is this host's SSH port, the same as hosts[*].port.
	Port int `json:"port,omitempty"`
	// Bastion is this host's own jump host instead of spec.ssh.bastion (e.g. one per site), with
	// the same fields and defaults; nil: spec.ssh.bastion (or none). Connections to the host's etcd
	// client URL (status, backups, drills) go through it too.
	Bastion *Bastion `json:"bastion,omitempty"`
}

// Etcd configures the etcd members.
type Etcd struct {
	// Version is the etcd version the binaries must report, e.g. v3.6.16.
	Version string `json:"version"`
	// Binaries are local files uploaded to every member (air-gapped installs). Exactly one of
	// Binaries and Download is set.
	Binaries EtcdBinaries `json:"binaries,omitempty"`
	// Download fetches the etcd release tarball on each host from a URL (a release site or an
	// internal mirror), verified against a mandatory sha256 before anything is installed.
	Download *EtcdDownload `json:"download,omitempty"`
	// DataDir is the absolute data directory on each member (default /var/lib/etcd).
	DataDir string `json:"dataDir,omitempty"`
	// ClientPort serves clients over TLS (default 2379).
	ClientPort int `json:"clientPort,omitempty"`
	// PeerPort serves raft peers over TLS (default 2380).
	PeerPort int `json:"peerPort,omitempty"`
	// HeartbeatInterval is raft's heartbeat (default 100ms; whole milliseconds).
	HeartbeatInterval Duration `json:"heartbeatInterval,omitzero"`
	// ElectionTimeout is raft's election timeout (default 1000ms; whole milliseconds; at least
	// limits.MinElectionHeartbeatRatio x heartbeat and at most limits.MaxElectionTimeout, as etcd
	// enforces).
	ElectionTimeout Duration `json:"electionTimeout,omitzero"`
	// QuotaBackendBytes is the backend size quota in bytes (default 2147483648 = 2 GiB, etcd's default).
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`
	// AutoCompaction configures etcd's auto compaction.
	AutoCompaction AutoCompaction `json:"autoCompaction,omitempty"`
	// MetricsAddress is where etcd also serves /metrics and /health (plain HTTP, port
	// limits.EtcdMetricsPort = 2381) for scrapers on other machines; loopback (127.0.0.1:2381) always
	// serves them. "" (default): loopback only; "host": each member's own address
	// (spec.hosts[*].address); "0.0.0.0" or "::": every interface. The endpoint is unauthenticated
	// (metrics hold no keys or values): allow port 2381 from your scrapers only.
	MetricsAddress string `json:"metricsAddress,omitempty"`
	// AcceptZoneQuorumLoss acknowledges a topology where losing one zone loses quorum: the
	// zone-spread error becomes a warning naming the zone.
	AcceptZoneQuorumLoss bool `json:"acceptZoneQuorumLoss,omitempty"`
	// Spares are hosts that may receive an etcd member when hactl-operator heals the cluster (a
	// member unhealthy past its grace period replaced onto a spare, learner first). They are not in
	// spec.hosts and carry no roles: nothing runs on them until a heal, and hactl bootstrap leaves
	// them alone. Name, address, port and zone are a host's (the names and addresses unique among
	// hosts and spares); `hactl operator deploy` issues their server and peer certificates ahead,
	// for these addresses, so the CA key never goes into the Kubernetes cluster.
	Spares []Spare `json:"spares,omitempty"`
}

// Spare is a machine that may receive an etcd member (spec.etcd.spares): a host without roles.
type Spare struct {
	// Name is an RFC 1123 label, unique among hosts and spares; the member's name once it has one.
	Name string `json:"name"`
	// Address is an IPv4 or IPv6 literal, unique among hosts and spares (canonicalised by Default);
	// the new member's peer and client URLs and its certificates' SANs use it.
	Address string `json:"address"`
	// Port is the SSH port (default spec.ssh.port).
	Port int `json:"port,omitempty"`
	// Zone is the availability zone label: a heal prefers a spare in the lost member's zone.
	Zone string `json:"zone"`
}

// Host returns the spare as a host with role etcd: the host it becomes once it runs a member.
func (s Spare) Host() Host {
	return Host{Name: s.Name, Address: s.Address, Port: s.Port, Zone: s.Zone, Roles: []Role{RoleEtcd}}
}

// EtcdDownload is an etcd release tarball (etcd-<version>-linux-<arch>.tar.gz layout: one top-level
// directory holding etcd, etcdctl and etcdutl).
type EtcdDownload struct {
	// URL is an http(s) URL of the tarball.
	URL string `json:"url"`
	// SHA256 is the tarball's sha256, 64 hex digits (mandatory; lower-cased by SetDefaults).
	SHA256 string `json:"sha256"`
}

// EtcdBinaries are local paths of the etcd release binaries.
type EtcdBinaries struct {
	Etcd    string `json:"etcd"`
	Etcdctl string `json:"etcdctl,omitempty"`
	Etcdutl string `json:"etcdutl,omitempty"`
}

// AutoCompaction mirrors etcd's --auto-compaction-mode and --auto-compaction-retention.
type AutoCompaction struct {
	// Mode is "periodic" (default) or "revision".
	Mode string `json:"mode,omitempty"`
	// Retention is a duration for periodic mode (default 1h) or a revision count for revision mode.
	Retention string `json:"retention,omitempty"`
}

// MetricsAddressHost is spec.etcd.metricsAddress's value for "each member's own address".
const MetricsAddressHost = "host"

// Duration is a time.Duration written as a Go duration string ("100ms", "1m30s"). Spec fields of
// this type are tagged omitzero: a zero duration is left out when a spec is written, since a
// zero written out is refused where it would stand for the default (see zeroDefault).
type Duration struct {
	time.Duration
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// UnmarshalJSON reads a duration string such as "100ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"100ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// HasRole reports whether the host carries role r.
func (h Host) HasRole(r Role) bool {
	for _, x := range h.Roles {
		if x == r {
			return true
		}
	}
	return false
}

// EtcdHosts returns the hosts with role etcd, in spec order.
func (c *Cluster) EtcdHosts() []Host { return c.hostsWith(RoleEtcd) }

// SSHUser returns the login user of host name: its hosts[*].ssh.user, else spec.ssh.user (also for a
// name the spec does not list).
func (c *Cluster) SSHUser(name string) string {
	for _, h := range c.Spec.Hosts {
		if h.Name == name && h.SSH != nil && h.SSH.User != "" {
			return h.SSH.User
		}
	}
	return c.Spec.SSH.User
}

// PeerAddress returns the address h's peers and kubelet use: PrivateAddress, else Address.
func (h Host) PeerAddress() string {
	if h.PrivateAddress != "" {
		return h.PrivateAddress
	}
	return h.Address
}

// ControlPlaneHosts returns the hosts with role control-plane (the kube-apiservers, the load
// balancer's backends), in spec order.
func (c *Cluster) ControlPlaneHosts() []Host { return c.hostsWith(RoleControlPlane) }

// HasBastion reports whether any host is reached through a jump host: spec.ssh.bastion or a host's
// own (hosts[*].ssh.bastion).
func (c *Cluster) HasBastion() bool {
	if c.Spec.SSH.Bastion != nil {
		return true
	}
	for _, h := range c.Spec.Hosts {
		if h.SSH != nil && h.SSH.Bastion != nil {
			return true
		}
	}
	return false
}

// ManagedLB returns spec.loadBalancer when hactl runs it (HAProxy + Keepalived and a VIP); nil
// without a load balancer or with an external one.
func (c *Cluster) ManagedLB() *LoadBalancer {
	if lb := c.Spec.LoadBalancer; lb != nil && lb.External == nil {
		return lb
	}
	return nil
}

// ExternalLB returns spec.loadBalancer.external, the user's own load balancer, or nil.
func (c *Cluster) ExternalLB() *ExternalLoadBalancer {
	if lb := c.Spec.LoadBalancer; lb != nil {
		return lb.External
	}
	return nil
}

// APIEndpoint returns where nodes and clients reach the kube-apiservers through the load balancer,
// as host and port: external's address and port, or the VIP's address at frontendPort (defaulted
// spec). ok is false without a load balancer or when the VIP does not parse.
func (c *Cluster) APIEndpoint() (host string, port int, ok bool) {
	lb := c.Spec.LoadBalancer
	switch {
	case lb == nil:
		return "", 0, false
	case lb.External != nil:
		port = lb.External.Port
		if port == 0 {
			port = DefaultExternalLBPort
		}
		return lb.External.Address, port, lb.External.Address != ""
	}
	p, err := netip.ParsePrefix(lb.VIP)
	if err != nil {
		return "", 0, false
	}
	port = lb.FrontendPort
	if port == 0 {
		port = DefaultFrontendPort
	}
	return p.Addr().String(), port, true
}

// APIServerPort returns the kube-apiserver port on the control-plane hosts:
// spec.loadBalancer.apiServerPort, else DefaultAPIServerPort.
func (c *Cluster) APIServerPort() int {
	if lb := c.Spec.LoadBalancer; lb != nil && lb.APIServerPort != 0 {
		return lb.APIServerPort
	}
	return DefaultAPIServerPort
}

// LBHosts returns the hosts running HAProxy + Keepalived, in spec order: with topology colocated the
// control-plane hosts, otherwise the hosts with role lb. It returns nil without spec.loadBalancer
// and with an external one (hactl runs none).
func (c *Cluster) LBHosts() []Host {
	switch lb := c.Spec.LoadBalancer; {
	case lb == nil, lb.External != nil:
		return nil
	case lb.Topology == TopologyColocated:
		return c.ControlPlaneHosts()
	default:
		return c.hostsWith(RoleLB)
	}
}

func (c *Cluster) hostsWith(r Role) []Host {
	var out []Host
	for _, h := range c.Spec.Hosts {
		if h.HasRole(r) {
			out = append(out, h)
		}
	}
	return out
}
