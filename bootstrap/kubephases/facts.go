package kubephases

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
)

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/<pid>/status CapBnd (linux/capability.h).
const capSysResource = 24

// nodeProbe prints, as kube.* facts: the cgroup filesystem, the capability bounding set, active swap
// areas, bridge netfilter and IPv4 forwarding (and whether /proc/sys is writable), the CNI plugins'
// directory, containerd's version and the images in its k8s.io namespace. It changes nothing.
const nodeProbe = `fact kube.cgroupfs "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)"
fact kube.capbnd "$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
fact kube.swap "$(awk 'NR > 1' /proc/swaps 2>/dev/null | wc -l)"
if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then fact kube.brnf "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)"; else fact kube.brnf missing; fi
fact kube.ipforward "$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null)"
if [ -w /proc/sys/net/ipv4/ip_forward ]; then fact kube.procsys rw; else fact kube.procsys ro; fi
for d in /opt/cni/bin /usr/lib/cni /usr/libexec/cni; do if [ -x "$d/bridge" ] && [ -x "$d/host-local" ]; then fact kube.cnibin "$d"; break; fi; done
if command -v containerd >/dev/null 2>&1; then fact kube.containerd "$(containerd --version 2>/dev/null | awk '{print $3}')"; fi
if command -v ctr >/dev/null 2>&1 && [ -S /run/containerd/containerd.sock ]; then
  ctr -n k8s.io images ls -q 2>/dev/null | while read -r i; do case "$i" in sha256:*) ;; *) fact kube.image "$i" ;; esac; done
fi
`

// binPath is where artifact name is installed.
func binPath(name string) string { return kubenode.BinDir + "/" + name }

// managedFiles are the files hactl writes on every node (checksummed by the facts command).
func managedFiles() []string {
	return []string{kubenode.KubeletUnitPath, kubenode.KubeadmDropInPath, kubenode.ContainerdConfigPath,
		kubenode.SysctlPath, kubenode.ModulesPath, kubenode.CNIConfPath, kubenode.RoutesUnitPath}
}

// Resolver files: kubelet hands a pod with dnsPolicy Default (CoreDNS) the node's resolv.conf —
// systemd-resolved's upstream file when it exists (kubeadm's choice), else /etc/resolv.conf —
// unless the KubeletConfiguration names another (resolvConf).
const (
	etcResolvConf      = "/etc/resolv.conf"
	resolvedResolvConf = "/run/systemd/resolve/resolv.conf"
)

// factsRequest is what preflight gathers on node n (one command with the other groups' requests);
// resolvConf is the KubeletConfiguration's resolvConf ("" when unset).
func factsRequest(n node, resolvConf string) provision.FactsRequest {
	files := managedFiles()
	for _, b := range kubenode.Binaries {
		files = append(files, binPath(b.Name))
	}
	files = append(files, kubenode.KubeadmFiles...)
	if n.cp {
		files = append(files, kubeadm.EtcdCAFile, kubeadm.EtcdClientCertFile, kubeadm.EtcdClientKeyFile)
	}
	read := []string{kubenode.MarkerPath, kubenode.CNIConfPath}
	if resolvConf != "" {
		read = append(read, resolvConf)
	} else {
		read = append(read, etcResolvConf, resolvedResolvConf)
	}
	if n.cp {
		read = append(read, "/etc/kubernetes/pki/ca.crt")
	}
	return provision.FactsRequest{
		Files: files, SumCache: provision.DefaultSumCache, Read: read,
		Units:    []string{"kubelet", "containerd", kubenode.RoutesUnit},
		Commands: kubenode.RuntimeCommands, Listen: true,
		Probes: []provision.Probe{{Name: "kube.node", Script: nodeProbe}},
	}
}

// nodeFacts is the group's view of a node's facts.
type nodeFacts struct {
	OS, Arch, PkgManager string
	Systemd              bool
	Sums                 map[string]string // path → sha256 of existing files
	Marker               string            // the marker's content ("" when missing)
	CNIConf              []byte            // the bridge conflist (nil when missing)
	CA                   []byte            // the cluster CA (control planes; nil when missing)
	Kubelet, Containerd  provision.UnitState
	RoutesUnit           provision.UnitState
	Have                 map[string]bool // RuntimeCommands found
	Listen               map[int]bool
	CgroupV2             bool
	CapSysResource       bool
	Swap                 int
	BridgeNF             string // "1", "0" or "missing"
	IPForward            string
	ProcSysRW            bool
	CNIBin               string
	ContainerdVersion    string
	Images               map[string]bool
	// ResolvConf is the resolver file kubelet gives pods, and its content (nil when missing).
	ResolvConf     string
	ResolvConfData []byte
}

// factsFrom reads node n's view from the gathered facts (resolvConf as for factsRequest).
func factsFrom(pf *provision.Facts, resolvConf string) *nodeFacts {
	f := &nodeFacts{OS: pf.Host.OSPretty, Arch: pf.Host.Arch, PkgManager: pf.Host.PackageManager, Systemd: pf.Host.Systemd,
		Sums: pf.Sums, Have: pf.Commands, Listen: pf.Listen, Images: map[string]bool{}}
	if f.Sums == nil {
		f.Sums = map[string]string{}
	}
	f.Marker = strings.TrimSpace(string(pf.Files[kubenode.MarkerPath]))
	f.CNIConf = pf.Files[kubenode.CNIConfPath]
	f.CA = pf.Files["/etc/kubernetes/pki/ca.crt"]
	f.Kubelet, f.Containerd, f.RoutesUnit = pf.Units["kubelet"], pf.Units["containerd"], pf.Units[kubenode.RoutesUnit]
	f.CgroupV2 = pf.Value("kube.cgroupfs") == "cgroup2fs"
	if capBnd, err := strconv.ParseUint(pf.Value("kube.capbnd"), 16, 64); err == nil {
		f.CapSysResource = capBnd&(1<<capSysResource) != 0
	}
	f.Swap, _ = strconv.Atoi(pf.Value("kube.swap"))
	f.BridgeNF, f.IPForward = pf.Value("kube.brnf"), pf.Value("kube.ipforward")
	f.ProcSysRW = pf.Value("kube.procsys") == "rw"
	f.CNIBin = pf.Value("kube.cnibin")
	f.ContainerdVersion = pf.Value("kube.containerd")
	for _, i := range pf.Values("kube.image") {
		f.Images[i] = true
	}
	switch {
	case resolvConf != "":
		f.ResolvConf = resolvConf
	case pf.Files[resolvedResolvConf] != nil:
		f.ResolvConf = resolvedResolvConf
	default:
		f.ResolvConf = etcResolvConf
	}
	f.ResolvConfData = pf.Files[f.ResolvConf]
	return f
}

// loopbackResolvers returns the nameservers of a resolv.conf when every one is a loopback address
// (nil otherwise, and for a file without nameservers: then the C library's default, also
// loopback, applies — reported too).
func loopbackResolvers(conf []byte) []string {
	var all []string
	for _, line := range strings.Split(string(conf), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			all = append(all, f[1])
		}
	}
	if len(all) == 0 {
		return []string{"(none: the default 127.0.0.1)"}
	}
	for _, ns := range all {
		if a, err := netip.ParseAddr(ns); err != nil || !a.IsLoopback() {
			return nil
		}
	}
	return all
}

// joined: hactl's kubeadm init or join finished on the node.
func (f *nodeFacts) joined() bool { return f.Marker != "" }

// leftovers lists kubeadm's files on a node without the marker (an interrupted init or join).
func (f *nodeFacts) leftovers() []string {
	var out []string
	for _, p := range kubenode.KubeadmFiles {
		if _, ok := f.Sums[p]; ok {
			out = append(out, p)
		}
	}
	return out
}
