package v1alpha1

import (
	"net/netip"
	"path/filepath"
	"strings"
	"time"
)

// Default values SetDefaults fills in.
const (
	DefaultSSHUser           = "root"
	DefaultSSHPort           = 22
	DefaultKnownHostsFile    = "~/.ssh/known_hosts"
	DefaultConnectTimeout    = 10 * time.Second
	DefaultCommandTimeout    = 2 * time.Minute
	DefaultMaxParallel       = 10
	DefaultStateDirParent    = "~/.hactl" // the state dir is <DefaultStateDirParent>/<metadata.name>
	DefaultDataDir           = "/var/lib/etcd"
	DefaultClientPort        = 2379
	DefaultPeerPort          = 2380
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultElectionTimeout   = 1000 * time.Millisecond
	DefaultQuotaBackendBytes = int64(2147483648) // 2 GiB, etcd's default
	DefaultCompactionMode    = CompactionPeriodic
	DefaultPeriodicRetention = "1h"
	DefaultAgent             = AgentAuto
	DefaultBastionPort       = 22

	DefaultVirtualRouterID = 51
	DefaultLBMode          = LBModeUnicast
	// DefaultAdvertInterval is spec.loadBalancer.advertInterval when unset: 500ms, VRRPv3 (RFC 5798).
	// Measured in the lab (bench/lb, 5 runs each): the VIP leaves a frozen holder (no priority-0
	// advertisement: the master-down interval, 3 x interval + skew) after a median 1.74 s, against
	// 3.39 s with 1s; with HAProxy stopped 0.63 s against 0.93 s. With auth on an IPv4 VIP it is
	// DefaultAdvertIntervalAuth instead: VRRPv2, the version with authentication, counts whole seconds.
	DefaultAdvertInterval     = 500 * time.Millisecond
	DefaultAdvertIntervalAuth = 1 * time.Second
	DefaultTopology           = TopologyDedicated
	DefaultFrontendPort       = 6443
	DefaultAPIServerPort      = 6443
	// DefaultExternalLBPort is spec.loadBalancer.external.port's default, kubeadm's usual endpoint port.
	DefaultExternalLBPort  = 6443
	DefaultLBCheckInterval = 2 * time.Second
	DefaultLBCheckFall     = 3
	DefaultLBCheckRise     = 2
	// DefaultCheckWeight is spec.loadBalancer.checkWeight when unset: 0, a failed check puts the host
	// into FAULT, which hands the VIP over at once (a priority-0 advertisement, RFC 5798 §6.4.3; the
	// backup waits only its skew time). Measured in the lab (bench/lb): about 2 s, against about 4.4 s
	// with a weight, where the backup discards the holder's lower-priority advertisements and waits
	// out its master-down interval (§6.4.2).
	DefaultCheckWeight = 0
	// DefaultCheckFall is spec.loadBalancer.checkFall when unset: 1, the first failed check of the
	// local HAProxy counts. Measured in the lab (bench/lb, HAProxy stopped on the holder, 10 runs):
	// VIP moved after a median 1.11 s with fall 1 against 2.01 s with fall 2. The price: one check
	// that times out (2 s) on a loaded host moves the VIP, which costs clients one reconnect.
	DefaultCheckFall = 1
	// DefaultDeltaEvery is spec.backup.deltaEvery when unset (etcd-backup-restore's delta interval
	// is of the same order).
	DefaultDeltaEvery = 30 * time.Second
)

// VRRP modes (spec.loadBalancer.mode).
const (
	// LBModeUnicast sends VRRP advertisements to each other LB host (keepalived unicast_peer): works
	// where multicast is filtered (many switches and virtual networks).
	LBModeUnicast = "unicast"
	// LBModeMulticast sends them to the VRRP multicast group (224.0.0.18 / ff02::12).
	LBModeMulticast = "multicast"
)

// Load balancer topologies (spec.loadBalancer.topology).
const (
	// TopologyDedicated runs HAProxy + Keepalived on the hosts with role lb.
	TopologyDedicated = "dedicated"
	// TopologyColocated runs them on the control-plane hosts, next to the kube-apiservers.
	TopologyColocated = "colocated"
)

// ssh-agent modes (spec.ssh.agent).
const (
	// AgentAuto uses the agent at SSH_AUTH_SOCK when that variable is set; its keys are tried first.
	AgentAuto = "auto"
	// AgentNever never contacts an agent: only key files authenticate.
	AgentNever = "never"
	// AgentRequired fails when no agent answers at SSH_AUTH_SOCK.
	AgentRequired = "required"
)

// Auto-compaction modes (etcd's --auto-compaction-mode).
const (
	CompactionPeriodic = "periodic"
	CompactionRevision = "revision"
)

// SetDefaults fills unset fields (zero values: "", 0, "0s") with the defaults above, expands and
// resolves local paths and canonicalises host addresses. It is pure (the directories come in dirs,
// nothing is looked up), idempotent and never fails: values it can't make sense of are left for
// Validate to report.
//
// SSH: spec.ssh.agent defaults to "auto". A bastion (when set) defaults to port 22, user
// spec.ssh.user and knownHostsFile spec.ssh.knownHostsFile; its identityFile stays "" (the keys and
// agent of spec.ssh are used).
//
// Hosts and spec.etcd.spares: port defaults to spec.ssh.port.
//
// spec.etcd.download.sha256 is lower-cased (sha256sum prints lower case; some release pages upper).
//
// spec.loadBalancer (when set): virtualRouterID 51, mode unicast, advertInterval 500ms (1s with auth on an IPv4 VIP), topology
// dedicated, frontendPort and apiServerPort 6443, healthCheck interval 2s, fall 3, rise 2; the VIP is
// canonicalised (CanonicalPrefix). Priorities and the check weight are not filled in: they are
// computed from host order when the spec leaves them out (lb.Plan; Validate proves them with lb's
// FailoverRule).
//
// Local paths (spec.stateDir, spec.ssh.identityFile, spec.ssh.identityFiles[*],
// spec.ssh.knownHostsFile, spec.ssh.bastion.identityFile, spec.ssh.bastion.knownHostsFile,
// spec.etcd.binaries.*, spec.loadBalancer.auth.file, spec.loadBalancer.healthCheck.caFile) are
// resolved with LocalPath against dirs: a leading "~" or "~/" is dirs.Home ("~user" is not
// expanded), a relative path is resolved against dirs.Base (the spec file's directory), and the
// result is cleaned. Remote paths (dataDir) are not touched.
//
// spec.backup (when set): compression zstd, objectStore.region us-east-1, objectStore.bucketLookup
// auto for *.amazonaws.com endpoints and path for others; its local paths (objectStore.tls.caFile,
// objectStore.credentials.file, encryption.recipientsFile) are resolved like the ones above.
//
// spec.kubernetes (when set): kubeletVersion = version, imageRepository registry.k8s.io, podSubnet
// 10.244.0.0/16, serviceSubnet 10.96.0.0/12, nodeCIDRMaskSize 24 (64 for an IPv6 pod subnet), cni
// bridge, nodeSubnet the network of spec.loadBalancer.vip; download sha256s lower-cased; its local
// paths (binaries.*, imageArchives[*], kubeletConfigurationFile) are resolved like the ones above.
//
// Addresses (spec.hosts[*].address, spec.etcd.spares[*].address, and spec.ssh.bastion.address when it is an IP literal; a
// bastion may be a DNS name, left as written) are canonicalised with net/netip: IPv6 is lower-cased and compressed
// ("2001:DB8::0001" -> "2001:db8::1"), and an IPv4-mapped IPv6 address is written as the IPv4
// address it maps ("::ffff:1.2.3.4" -> "1.2.3.4"): the host is reached over IPv4 either way, and the
// plain form is what goes into etcd URLs and certificate SANs and what the uniqueness check compares.
// Addresses with an IPv6 zone or that don't parse are left as written.
func SetDefaults(c *Cluster, dirs Dirs) {
	s := &c.Spec

	if s.SSH.User == "" {
		s.SSH.User = DefaultSSHUser
	}
	if s.SSH.Port == 0 {
		s.SSH.Port = DefaultSSHPort
	}
	if s.SSH.KnownHostsFile == "" {
		s.SSH.KnownHostsFile = DefaultKnownHostsFile
	}
	if s.SSH.ConnectTimeout.Duration == 0 {
		s.SSH.ConnectTimeout.Duration = DefaultConnectTimeout
	}
	if s.SSH.CommandTimeout.Duration == 0 {
		s.SSH.CommandTimeout.Duration = DefaultCommandTimeout
	}
	if s.SSH.MaxParallel == 0 {
		s.SSH.MaxParallel = DefaultMaxParallel
	}
	if s.SSH.Agent == "" {
		s.SSH.Agent = DefaultAgent
	}
	bastions := []*Bastion{s.SSH.Bastion}
	for i := range s.Hosts {
		if hs := s.Hosts[i].SSH; hs != nil {
			bastions = append(bastions, hs.Bastion)
		}
	}
	for _, b := range bastions {
		if b == nil {
			continue
		}
		if b.Port == 0 {
			b.Port = DefaultBastionPort
		}
		if b.User == "" {
			b.User = s.SSH.User
		}
		if b.KnownHostsFile == "" {
			b.KnownHostsFile = s.SSH.KnownHostsFile
		}
		b.Address = CanonicalAddress(b.Address)
	}
	if s.StateDir == "" && c.Metadata.Name != "" {
		s.StateDir = DefaultStateDirParent + "/" + c.Metadata.Name
	}

	for i := range s.Hosts {
		h := &s.Hosts[i]
		if h.Port == 0 && h.SSH != nil {
			h.Port = h.SSH.Port
		}
		if h.Port == 0 {
			h.Port = s.SSH.Port
		}
		h.Address = CanonicalAddress(h.Address)
		h.PrivateAddress = CanonicalAddress(h.PrivateAddress)
	}
	for i := range s.Etcd.Spares {
		h := &s.Etcd.Spares[i]
		if h.Port == 0 {
			h.Port = s.SSH.Port
		}
		h.Address = CanonicalAddress(h.Address)
	}

	e := &s.Etcd
	if e.DataDir == "" {
		e.DataDir = DefaultDataDir
	}
	if e.ClientPort == 0 {
		e.ClientPort = DefaultClientPort
	}
	if e.PeerPort == 0 {
		e.PeerPort = DefaultPeerPort
	}
	if e.HeartbeatInterval.Duration == 0 {
		e.HeartbeatInterval.Duration = DefaultHeartbeatInterval
	}
	if e.ElectionTimeout.Duration == 0 {
		e.ElectionTimeout.Duration = DefaultElectionTimeout
	}
	if e.QuotaBackendBytes == 0 {
		e.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	if e.AutoCompaction.Mode == "" {
		e.AutoCompaction.Mode = DefaultCompactionMode
	}
	if e.AutoCompaction.Retention == "" && e.AutoCompaction.Mode == CompactionPeriodic {
		e.AutoCompaction.Retention = DefaultPeriodicRetention
	}

	if d := e.Download; d != nil {
		d.SHA256 = strings.ToLower(d.SHA256)
	}

	lb := s.LoadBalancer
	if lb != nil && lb.External != nil {
		// hactl runs nothing: only the endpoint and the apiservers' port have defaults, so that
		// validation sees every HAProxy or Keepalived field the document set.
		if a, err := netip.ParseAddr(lb.External.Address); err == nil && a.Zone() == "" {
			lb.External.Address = a.String()
		}
		if lb.External.Port == 0 {
			lb.External.Port = DefaultExternalLBPort
		}
		if lb.APIServerPort == 0 {
			lb.APIServerPort = DefaultAPIServerPort
		}
	} else if lb != nil {
		lb.VIP = CanonicalPrefix(lb.VIP)
		if lb.VirtualRouterID == 0 {
			lb.VirtualRouterID = DefaultVirtualRouterID
		}
		if lb.Mode == "" {
			lb.Mode = DefaultLBMode
		}
		if lb.AdvertInterval.Duration == 0 {
			lb.AdvertInterval.Duration = DefaultAdvertInterval
			if p, err := netip.ParsePrefix(lb.VIP); lb.Auth != nil && (err != nil || p.Addr().Is4()) {
				lb.AdvertInterval.Duration = DefaultAdvertIntervalAuth
			}
		}
		if lb.Topology == "" {
			lb.Topology = DefaultTopology
		}
		if lb.FrontendPort == 0 {
			lb.FrontendPort = DefaultFrontendPort
		}
		if lb.APIServerPort == 0 {
			lb.APIServerPort = DefaultAPIServerPort
		}
		if lb.CheckWeight == nil {
			w := DefaultCheckWeight
			lb.CheckWeight = &w
		}
		if lb.CheckFall == 0 {
			lb.CheckFall = DefaultCheckFall
		}
		hc := &lb.HealthCheck
		if hc.Interval.Duration == 0 {
			hc.Interval.Duration = DefaultLBCheckInterval
		}
		if hc.Fall == 0 {
			hc.Fall = DefaultLBCheckFall
		}
		if hc.Rise == 0 {
			hc.Rise = DefaultLBCheckRise
		}
	}

	paths := []*string{&s.StateDir, &s.SSH.IdentityFile, &s.SSH.KnownHostsFile,
		&e.Binaries.Etcd, &e.Binaries.Etcdctl, &e.Binaries.Etcdutl}
	for i := range s.SSH.IdentityFiles {
		paths = append(paths, &s.SSH.IdentityFiles[i])
	}
	for i := range s.Hosts {
		if hs := s.Hosts[i].SSH; hs != nil {
			paths = append(paths, &hs.IdentityFile)
			if b := hs.Bastion; b != nil {
				paths = append(paths, &b.IdentityFile, &b.KnownHostsFile)
			}
		}
	}
	if b := s.SSH.Bastion; b != nil {
		paths = append(paths, &b.IdentityFile, &b.KnownHostsFile)
	}
	if lb != nil {
		paths = append(paths, &lb.HealthCheck.CAFile)
		if lb.Auth != nil {
			paths = append(paths, &lb.Auth.File)
		}
	}
	if s.Backup != nil {
		paths = append(paths, s.Backup.setDefaults()...)
	}
	if s.Kubernetes != nil {
		paths = append(paths, s.Kubernetes.setDefaults(lb)...)
	}
	if s.Scheduler != nil {
		paths = append(paths, s.Scheduler.setDefaults()...)
	}
	for _, p := range paths {
		*p = LocalPath(*p, dirs)
	}
}

// CanonicalAddress returns addr in canonical form (see SetDefaults), or addr unchanged when it is
// not an IP literal or carries an IPv6 zone.
func CanonicalAddress(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" {
		return addr
	}
	return ip.Unmap().String()
}

// CanonicalPrefix returns an address with prefix length ("10.0.1.100/24") in canonical form: the
// address as CanonicalAddress writes it (IPv6 lower-cased and compressed, IPv4-mapped IPv6 as IPv4
// with the prefix length reduced by 96), the prefix length in decimal. The address keeps its host
// bits (it is an address on a network, not the network). Anything else is returned unchanged.
func CanonicalPrefix(s string) string {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return s
	}
	ip, bits := p.Addr(), p.Bits()
	if ip.Is4In6() {
		if bits < 96 {
			return s
		}
		ip, bits = ip.Unmap(), bits-96
	}
	return netip.PrefixFrom(ip, bits).String()
}

// Dirs are the local directories a spec's local paths resolve against (SetDefaults, LocalPath).
// specload fills them in from the spec file's location and the current user.
type Dirs struct {
	// Base is the directory relative paths resolve against: the spec file's directory, absolute.
	// "" keeps relative paths relative (to the working directory of whoever opens them).
	Base string
	// Home is the current user's home directory, which a leading "~" stands for. "" leaves paths
	// starting with "~" as written.
	Home string
}

// LocalPath resolves a local path of the spec: a leading "~" or "~/" becomes dirs.Home, a relative
// path is joined to dirs.Base (unless that is ""), and the result is cleaned (filepath.Clean). ""
// stays "", and a "~" path is returned as written when dirs.Home is "". It reads nothing: the
// directories are what dirs says.
func LocalPath(p string, dirs Dirs) string {
	if p == "" {
		return ""
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if dirs.Home == "" {
			return p
		}
		p = filepath.Join(dirs.Home, p[1:])
	}
	if !filepath.IsAbs(p) && dirs.Base != "" {
		p = filepath.Join(dirs.Base, p)
	}
	return filepath.Clean(p)
}
