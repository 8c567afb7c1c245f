// Package limits holds the bounds and reserved values that the spec's validation (api/v1alpha1) and
// the renderers (etcd's systemd unit, lb's keepalived.conf and haproxy.cfg) must agree on, each
// written once with its source. It is constants only and imports nothing from hactl, so
// api/v1alpha1 stays a leaf; messages that quote a limit are built from these constants.
package limits

import "time"

// etcd's raft timing, as etcd's embed.Config.Validate (go.etcd.io/etcd/server/v3/embed/config.go)
// enforces it at start: --heartbeat-interval > 0, --election-timeout >= 5 x --heartbeat-interval and
// <= 50000 ms (maxElectionMs; etcd docs, tuning.md "Time parameters"). Both flags are whole
// milliseconds.
const (
	// MaxElectionTimeout is the longest --election-timeout etcd accepts: 50000 ms.
	MaxElectionTimeout = 50000 * time.Millisecond
	// MinElectionHeartbeatRatio is how many heartbeat intervals the election timeout must at least
	// span: etcd refuses to start below 5.
	MinElectionHeartbeatRatio = 5
	// SuggestedElectionHeartbeatRatio is the ratio hactl's messages suggest: about 10 heartbeats per
	// election timeout, as etcd's defaults (100 ms / 1000 ms) and tuning guide have it.
	SuggestedElectionHeartbeatRatio = 10
)

// Ports hactl reserves on the hosts: the spec may use them for nothing else, and the renderers bind
// them.
const (
	// EtcdMetricsPort is the loopback port of etcd's --listen-metrics-urls (http://127.0.0.1:2381,
	// etcd's and kubeadm's usual metrics port); spec.etcd.clientPort and peerPort must differ.
	EtcdMetricsPort = 2381
	// LBLocalPort is HAProxy's loopback endpoint on every LB host (http://127.0.0.1:8405: /metrics for
	// Prometheus, /healthz for Keepalived's check of the local HAProxy); spec.loadBalancer.frontendPort
	// must differ.
	LBLocalPort = 8405
)

// VRRP and Keepalived. Sources: RFC 5798 (VRRPv3, run by keepalived for IPv6) §5.2.3 (virtual router
// ID), §5.2.4 (priority: 255 for the address owner, 1-254 for backups, 0 for "stopped"), §5.2.7
// (advertisement interval: 12 bits of centiseconds); RFC 3768 (VRRPv2, IPv4) §5.3.7 (advertisement
// interval: 8 bits of seconds) and RFC 2338 §5.3.10 (8 bytes of authentication data); keepalived.conf(5)
// for vrrp_script's weight and auth_pass.
const (
	// MinVRRPPriority and MaxVRRPPriority bound a configurable priority (and where keepalived clamps an
	// effective priority after a check's weight is applied).
	MinVRRPPriority = 1
	MaxVRRPPriority = 254
	// OwnerVRRPPriority is reserved for the owner of the virtual address, which hactl never configures.
	OwnerVRRPPriority = 255
	// MaxCheckWeight bounds the magnitude of a vrrp_script weight: keepalived takes -253..253.
	MaxCheckWeight = 253
	// MaxCheckFall bounds spec.loadBalancer.checkFall: with one check a second, 10 failed checks
	// already leave the VIP on a dead HAProxy for 10 s, past any failover goal hactl states.
	MaxCheckFall = 10
	// MinVirtualRouterID and MaxVirtualRouterID bound virtual_router_id (an 8-bit field, 0 not valid).
	MinVirtualRouterID = 1
	MaxVirtualRouterID = 255
	// MinAdvertInterval is VRRPv2's shortest advertisement interval, and its unit: whole seconds
	// (RFC 3768 §5.3.7, an 8-bit count of seconds).
	MinAdvertInterval = time.Second
	// MaxAdvertIntervalV4 bounds VRRPv2's interval (an IPv4 VIP with whole seconds: at most 255 s).
	MaxAdvertIntervalV4 = 255 * time.Second
	// AdvertIntervalUnitV3 is VRRPv3's unit, centiseconds (RFC 5798 §5.2.7), and MaxAdvertIntervalV3
	// its bound (a 12-bit count: 40.95 s). VRRPv3 runs for an IPv6 VIP, and for an IPv4 VIP whose
	// interval is not whole seconds.
	AdvertIntervalUnitV3 = 10 * time.Millisecond
	MaxAdvertIntervalV3  = 4095 * AdvertIntervalUnitV3
	// MinAdvertIntervalV3 is the shortest interval hactl writes: RFC 5798 allows 10 ms, but the
	// master-down interval (3 x the interval + skew) must outlast a busy host's late advertisement,
	// or the backup takes the VIP from a live holder.
	MinAdvertIntervalV3 = 100 * time.Millisecond
	// MaxVRRPSecretLength is the longest VRRP PASS secret: 8 bytes of authentication data, and
	// keepalived silently cuts longer ones ("Truncating auth_pass").
	MaxVRRPSecretLength = 8
)

// hactl's default VRRP priorities (lb/vrrp.DefaultPriorities), which the spec's messages suggest: the
// first LB host gets DefaultTopVRRPPriority, each next one DefaultVRRPPriorityStep less. The step is
// also what the computed check weight adds to the spread of the priorities (lb/vrrp.Weight).
const (
	DefaultTopVRRPPriority  = 150
	DefaultVRRPPriorityStep = 10
)

// Kubernetes. Sources: the version-skew policy (kubernetes.io/releases/version-skew-policy: kubelet
// must not be newer than kube-apiserver and may be up to three minor versions older);
// kube-controller-manager's node IPAM (the node CIDR mask may be at most 16 bits longer than the
// cluster CIDR's: pkg/controller/nodeipam, "--node-cidr-mask-size ... too big"); kube-apiserver's
// service CIDR check (at most 20 host bits: cmd/kube-apiserver/app/options/validation.go).
const (
	// MaxKubeletMinorSkew is how many minor versions kubelet may lag the control plane.
	MaxKubeletMinorSkew = 3
	// MaxNodeCIDRBits is how many bits longer a node's pod range may be than the pod subnet.
	MaxNodeCIDRBits = 16
	// MaxServiceSubnetHostBits bounds the service subnet: at most 2^20 addresses.
	MaxServiceSubnetHostBits = 20
	// MinServiceSubnetHostBits is the least: kube-apiserver takes the first address for the
	// kubernetes Service; MinServiceSubnetHostBitsDNS with CoreDNS, whose Service kubeadm puts at
	// the tenth address.
	MinServiceSubnetHostBits    = 3
	MinServiceSubnetHostBitsDNS = 4
	// NodePortMin and NodePortMax are kube-apiserver's default --service-node-port-range.
	NodePortMin = 30000
	NodePortMax = 32767
)

// Kubernetes ports hactl's preflight checks on a node before it joins (kubeadm's own preflight
// checks the same: kubernetes.io/docs/reference/networking/ports-and-protocols).
const (
	KubeletPort               = 10250
	KubeControllerManagerPort = 10257
	KubeSchedulerPort         = 10259
	// KubeletHealthzPort is kubelet's localhost healthz port; KubeProxyMetricsPort and
	// KubeProxyHealthzPort are kube-proxy's (the same page).
	KubeletHealthzPort   = 10248
	KubeProxyMetricsPort = 10249
	KubeProxyHealthzPort = 10256
)

// Backups.
const (
	// MinDeltaEvery bounds spec.backup.deltaEvery from below: every delta is an object-store write
	// and a metadata object, and the agent's watch batches changes for that long.
	MinDeltaEvery = 5 * time.Second
)
