// Package kubenode renders what hactl installs on a Kubernetes node besides kubeadm's own files:
// containerd's configuration (cgroup driver, sandbox image, CNI paths, restrict_oom_score_adj where
// the host cannot raise OOM scores), kubelet's systemd unit with kubeadm's drop-in, the kernel
// settings and modules kubelet and kube-proxy need, and, for spec.kubernetes.cni bridge, the node's
// CNI network and the routes to the other nodes' pod ranges. Everything is rendered from values:
// the same inputs give byte-identical files, so a re-run compares checksums and changes nothing.
package kubenode

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Paths on the node.
const (
	BinDir               = "/usr/local/bin"
	KubeletUnitPath      = "/etc/systemd/system/kubelet.service"
	KubeadmDropInPath    = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
	ContainerdConfigPath = "/etc/containerd/config.toml"
	SysctlPath           = "/etc/sysctl.d/99-hactl-kubernetes.conf"
	ModulesPath          = "/etc/modules-load.d/hactl-kubernetes.conf"
	CNIConfDir           = "/etc/cni/net.d"
	CNIConfPath          = CNIConfDir + "/10-hactl-bridge.conflist"
	RoutesUnit           = "hactl-pod-routes.service"
	RoutesUnitPath       = "/etc/systemd/system/" + RoutesUnit
	// MarkerPath records that hactl's kubeadm init or join finished on the node: a node without it
	// but with kubeadm's files had a join interrupted and is reset before it joins again.
	MarkerPath = "/var/lib/hactl/kube/node"
	// ConfigDir holds the kubeadm configurations hactl writes for one command (0600: they carry the
	// join secrets), removed after the command.
	ConfigDir = "/etc/kubernetes/hactl"
	// PrevSuffix keeps the first configuration hactl replaced (a package's own, a hand-written one);
	// hactl reset puts it back.
	PrevSuffix = ".hactl-prev"
	// CRISocket is containerd's CRI socket.
	CRISocket = "unix:///run/containerd/containerd.sock"
)

// KubeadmFiles are the files kubeadm init/join writes: any of them without MarkerPath means an
// interrupted join. (hactl's etcd client credentials under /etc/kubernetes/pki are not among them.)
var KubeadmFiles = []string{
	"/etc/kubernetes/kubelet.conf", "/etc/kubernetes/bootstrap-kubelet.conf", "/etc/kubernetes/admin.conf",
	"/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/kubernetes/manifests/kube-controller-manager.yaml",
	"/etc/kubernetes/manifests/kube-scheduler.yaml", "/etc/kubernetes/pki/ca.crt", "/var/lib/kubelet/config.yaml",
}

// StaticPods are the control-plane components kubeadm runs as static pods (external etcd: no etcd pod).
var StaticPods = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Binaries are the node binaries and whether a worker needs them (kubectl: control planes only).
var Binaries = []struct {
	Name   string
	Worker bool
}{{"kubelet", true}, {"kubeadm", true}, {"kubectl", false}}

// KubeletUnit is kubelet.service as Kubernetes' deb/rpm packages ship it, with the binary in BinDir.
const KubeletUnit = `# Written by hactl: the kubelet unit of Kubernetes' packages.
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target containerd.service

[Service]
ExecStart=` + BinDir + `/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`

// KubeadmDropIn is kubeadm's 10-kubeadm.conf: kubelet runs with the kubeconfigs kubeadm writes,
// its KubeletConfiguration and the flags of kubeadm-flags.env.
const KubeadmDropIn = `# Written by hactl: kubeadm's drop-in (kubelet v1.11+).
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=` + BinDir + `/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`

// Sysctls are the kernel settings of a node: forwarding (pods and Services) and bridged traffic
// through iptables (kube-proxy's rules apply to pods on the bridge). kubeadm's preflight checks the
// same (FileContent--proc-sys-net-ipv4-ip_forward, ...bridge-nf-call-iptables).
const Sysctls = `# Written by hactl: what kubelet, kube-proxy and the CNI bridge need.
net.ipv4.ip_forward = 1
net.ipv6.conf.all.forwarding = 1
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
`

// Modules are the kernel modules loaded at boot: overlay (containerd's snapshotter) and
// br_netfilter (the bridge-nf-call sysctls).
const Modules = "# Written by hactl: containerd's overlay snapshotter and bridged traffic through iptables.\noverlay\nbr_netfilter\n"

// Containerd are the inputs of containerd's configuration.
type Containerd struct {
	// Version is `containerd --version`'s version (e.g. "1.6.20", "v2.1.4"): 2.x and later get
	// configuration version 3, older version 2.
	Version string
	// SystemdCgroup: the systemd cgroup driver (spec.kubernetes.runtime.cgroupDriver systemd).
	SystemdCgroup bool
	// SandboxImage is the pause image (kubeadm's, spec.kubernetes.imageRepository).
	SandboxImage string
	// RestrictOOMScoreAdj: the host lacks CAP_SYS_RESOURCE, so containers may not lower their OOM
	// score below containerd's (runc fails otherwise: "can't get final child's PID from pipe").
	RestrictOOMScoreAdj bool
	// CNIBinDir is where the CNI plugins are (/opt/cni/bin upstream, /usr/lib/cni on Debian).
	CNIBinDir string
}

// Major returns containerd's major version (0 when unknown): Version read by
// k8s.io/apimachinery/pkg/util/version's generic parser ("1.7.24", "v2.0.0", "1.6.20~ds1").
func (c Containerd) Major() int {
	v, err := version.ParseGeneric(c.Version)
	if err != nil {
		return 0
	}
	return int(v.Major())
}

// ContainerdConfig renders /etc/containerd/config.toml: only what differs from containerd's
// defaults (containerd merges a configuration over its defaults), in the configuration version of
// c.Version (2 for containerd 1.x, 3 for 2.x: containerd's docs/cri/config.md).
func ContainerdConfig(c Containerd) []byte {
	var b strings.Builder
	b.WriteString("# Written by hactl (spec.kubernetes): containerd's defaults with these settings.\n")
	if c.Major() >= 2 {
		fmt.Fprintf(&b, `version = 3

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = %q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = %t

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = %t

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = [%q]
  conf_dir = %q
`, c.SandboxImage, c.RestrictOOMScoreAdj, c.SystemdCgroup, c.CNIBinDir, CNIConfDir)
		return []byte(b.String())
	}
	fmt.Fprintf(&b, `version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = %t

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = %t

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = %q
  conf_dir = %q
`, c.SandboxImage, c.RestrictOOMScoreAdj, c.SystemdCgroup, c.CNIBinDir, CNIConfDir)
	return []byte(b.String())
}

// Packages returns the packages of the node's runtime tools for package manager pm (apt-get,
// dnf, yum), for the commands missing among need (containerd, runc, conntrack, socat, ethtool,
// iptables, the CNI plugins as "cni"): Debian's and Ubuntu's names, or Fedora's and RHEL's.
func Packages(pm string, missing []string) []string {
	apt := map[string]string{"containerd": "containerd", "runc": "runc", "conntrack": "conntrack", "socat": "socat",
		"ethtool": "ethtool", "iptables": "iptables", "cni": "containernetworking-plugins", "modprobe": "kmod"}
	rpm := map[string]string{"containerd": "containerd", "runc": "runc", "conntrack": "conntrack-tools", "socat": "socat",
		"ethtool": "ethtool", "iptables": "iptables", "cni": "containernetworking-plugins", "modprobe": "kmod"}
	names := apt
	if pm == "dnf" || pm == "yum" {
		names = rpm
	}
	var out []string
	for _, m := range missing {
		if p, ok := names[m]; ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// RuntimeCommands are the commands a node needs (Packages installs the missing ones); "cni" stands
// for the CNI plugins.
var RuntimeCommands = []string{"containerd", "runc", "ctr", "conntrack", "socat", "ethtool", "iptables", "modprobe"}

// BridgeConfig renders the node's CNI network (spec.kubernetes.cni bridge): bridge cni0, the pods'
// gateway, masquerading what leaves the pod network, with host-local addresses from the node's pod
// range (its Node's spec.podCIDR) and portmap for hostPorts.
func BridgeConfig(podCIDR netip.Prefix) []byte {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "hactl-bridge",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR.String()}}},
					"routes": []map[string]string{{"dst": defaultRoute(podCIDR)}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, _ := json.MarshalIndent(conf, "", "  ") // maps of strings and bools: cannot fail
	return append(b, '\n')
}

func defaultRoute(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "0.0.0.0/0"
	}
	return "::/0"
}

// BridgeRange reads the pod range back from a BridgeConfig (ok false when it is not one).
func BridgeRange(conf []byte) (netip.Prefix, bool) {
	var c struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if json.Unmarshal(conf, &c) != nil || len(c.Plugins) == 0 || c.Plugins[0].Type != "bridge" ||
		len(c.Plugins[0].IPAM.Ranges) != 1 || len(c.Plugins[0].IPAM.Ranges[0]) != 1 {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(c.Plugins[0].IPAM.Ranges[0][0].Subnet)
	return p, err == nil
}

// Route is one other node's pod range and the node's address.
type Route struct {
	PodCIDR netip.Prefix
	Via     netip.Addr
}

// RoutesUnitText renders RoutesUnit: a oneshot unit (run at every boot, after the network) adding a
// route to every other node's pod range via that node (nodes on one L2 segment). Routes are sorted,
// so the text depends only on the set.
func RoutesUnitText(routes []Route) []byte {
	rs := slices.Clone(routes)
	slices.SortFunc(rs, func(a, b Route) int { return strings.Compare(a.PodCIDR.String(), b.PodCIDR.String()) })
	var b strings.Builder
	b.WriteString(`# Written by hactl (spec.kubernetes.cni bridge): routes to the other nodes' pod ranges.
[Unit]
Description=hactl: routes to the other Kubernetes nodes' pod ranges
Wants=network-online.target
After=network-online.target
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
`)
	for _, r := range rs {
		fmt.Fprintf(&b, "ExecStart=/sbin/ip route replace %s via %s\n", r.PodCIDR, r.Via)
	}
	if len(rs) == 0 {
		b.WriteString("ExecStart=/bin/true\n")
	}
	b.WriteString("\n[Install]\nWantedBy=multi-user.target\n")
	return []byte(b.String())
}
