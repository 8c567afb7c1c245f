package v1alpha1

import (
	"net/netip"
	"strings"
)

// RoleWorker is a Kubernetes worker node: kubelet, the container runtime and kube-proxy, joined with
// `kubeadm join` (no control-plane components). It needs spec.kubernetes and a control-plane host.
const RoleWorker Role = "worker"

// Kubernetes is the Kubernetes cluster hactl builds on its etcd and VIP with kubeadm
// (spec.kubernetes): the runtime and kubelet on every node (control-plane and worker hosts), the
// control plane with `kubeadm init` on the first control-plane host and `kubeadm join
// --control-plane` on the others, then the workers. nil: hactl stops at etcd and the load balancer.
type Kubernetes struct {
	// Version is the control plane's release, e.g. v1.37.2: kubeadm's kubernetesVersion and the
	// version kubeadm and kubectl must report on the hosts (checked there before they are
	// installed). Minor versions: SupportedKubernetesMinors.
	Version string `json:"version"`
	// KubeletVersion is the release kubelet must report (default Version). Kubernetes' version-skew
	// policy (kubernetes.io/releases/version-skew-policy): never newer than the control plane, at
	// most limits.MaxKubeletMinorSkew minor versions older.
	KubeletVersion string `json:"kubeletVersion,omitempty"`
	// Binaries are local files uploaded to the hosts (air-gapped installs); Download fetches them on
	// each host instead. Every artifact (kubelet, kubeadm, kubectl) comes from exactly one of the two.
	Binaries KubeBinaries `json:"binaries,omitzero"`
	// Download is where each host fetches an artifact from, verified against its sha256 before
	// anything is installed.
	Download KubeDownloads `json:"download,omitzero"`
	// Runtime is the container runtime (containerd).
	Runtime ContainerRuntime `json:"runtime,omitzero"`
	// ImageArchives are local `docker save` tarballs (or OCI archives) uploaded to every node and
	// imported into containerd's k8s.io namespace when an image they hold is missing there: the
	// air-gapped path. Together they must hold every image the cluster needs (KubeImages). Empty:
	// the nodes pull from ImageRepository.
	ImageArchives []string `json:"imageArchives,omitempty"`
	// ImageRepository is the registry the control-plane images come from (kubeadm's
	// imageRepository; default registry.k8s.io). With ImageArchives, the archives' images carry its
	// names and nothing is pulled.
	ImageRepository string `json:"imageRepository,omitempty"`
	// PodSubnet is the pods' CIDR (default 10.244.0.0/16); each node gets one /NodeCIDRMaskSize of it.
	PodSubnet string `json:"podSubnet,omitempty"`
	// ServiceSubnet is the Services' CIDR (default 10.96.0.0/12, kubeadm's).
	ServiceSubnet string `json:"serviceSubnet,omitempty"`
	// NodeCIDRMaskSize is the prefix length of each node's pod range, cut from PodSubnet by
	// kube-controller-manager (default 24 for IPv4, 64 for IPv6).
	NodeCIDRMaskSize int `json:"nodeCIDRMaskSize,omitempty"`
	// CNI is "bridge" (default: hactl writes a bridge + host-local network on every node and the
	// routes between the nodes' pod ranges; for nodes on one L2 segment) or "none" (the user applies
	// Calico, Cilium, ...; bootstrap waits for nodes to register, not to be Ready).
	CNI string `json:"cni,omitempty"`
	// NodeSubnet is the L2 segment of the nodes for cni bridge (every node's address inside it);
	// default: the prefix of spec.loadBalancer.vip.
	NodeSubnet string `json:"nodeSubnet,omitempty"`
	// CoreDNS deploys kubeadm's CoreDNS addon (default true); false skips it (no cluster DNS).
	CoreDNS *bool `json:"coreDNS,omitempty"`
	// KubeletConfigurationFile is a local KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
	// merged over what hactl writes: strict (an unknown field is an error), and it may not set the
	// fields hactl owns (cgroupDriver: see Runtime.CgroupDriver).
	KubeletConfigurationFile string `json:"kubeletConfigurationFile,omitempty"`
	// IgnorePreflightErrors are kubeadm's own preflight checks to ignore (kubeadm's
	// nodeRegistration.ignorePreflightErrors, e.g. Swap, SystemVerification; "all" ignores every
	// check). hactl's own checks are ignored with --ignore-preflight-errors.
	IgnorePreflightErrors []string `json:"ignorePreflightErrors,omitempty"`
	// Region labels every node topology.kubernetes.io/region (as hosts' zones label
	// topology.kubernetes.io/zone); "" sets no region label.
	Region string `json:"region,omitempty"`
}

// KubeBinaries are local paths of the Kubernetes node binaries.
type KubeBinaries struct {
	Kubelet string `json:"kubelet,omitempty"`
	Kubeadm string `json:"kubeadm,omitempty"`
	Kubectl string `json:"kubectl,omitempty"`
}

// KubeDownloads are per-artifact downloads (e.g. https://dl.k8s.io/release/v1.37.2/bin/linux/amd64/kubelet).
type KubeDownloads struct {
	Kubelet *Download `json:"kubelet,omitempty"`
	Kubeadm *Download `json:"kubeadm,omitempty"`
	Kubectl *Download `json:"kubectl,omitempty"`
}

// Download is one file fetched on the hosts: an http(s) URL and its mandatory sha256.
type Download struct {
	// URL is an http(s) URL of the file.
	URL string `json:"url"`
	// SHA256 is the file's sha256, 64 hex digits (lower-cased by SetDefaults).
	SHA256 string `json:"sha256"`
}

// ContainerRuntime configures containerd on every node.
type ContainerRuntime struct {
	// CgroupDriver is "systemd" or "cgroupfs", set for kubelet and containerd alike (a mismatch is
	// impossible by construction). Default: systemd on hosts with cgroup v2, cgroupfs on cgroup v1
	// (decided from the hosts' facts; hosts of both kinds need it set).
	CgroupDriver string `json:"cgroupDriver,omitempty"`
}

// Kubernetes CNI modes (spec.kubernetes.cni) and cgroup drivers (spec.kubernetes.runtime.cgroupDriver).
const (
	CNIBridge = "bridge"
	CNINone   = "none"

	CgroupDriverSystemd  = "systemd"
	CgroupDriverCgroupfs = "cgroupfs"
)

// Kubernetes defaults.
const (
	DefaultImageRepository  = "registry.k8s.io"
	DefaultPodSubnet        = "10.244.0.0/16"
	DefaultServiceSubnet    = "10.96.0.0/12"
	DefaultNodeCIDRMaskSize = 24
	DefaultNodeCIDRMaskV6   = 64
	DefaultCNI              = CNIBridge
)

// KubeImageSet is what kubeadm of one minor release deploys besides the release's own
// control-plane images: the pod sandbox (pause) and CoreDNS tags. Source: kubeadm's
// cmd/kubeadm/app/constants (PauseVersion, CoreDNSVersion), as `kubeadm config images list`
// prints them.
type KubeImageSet struct {
	Pause, CoreDNS string
}

// kubeImageSets maps a supported "1.MINOR" to its KubeImageSet.
var kubeImageSets = map[string]KubeImageSet{
	"1.37": {Pause: "3.10.2", CoreDNS: "v1.14.6"},
}

// SupportedKubernetesMinors returns the Kubernetes minor releases hactl knows the images of.
func SupportedKubernetesMinors() []string { return []string{"1.37"} }

// KubeImages returns the image references the cluster's nodes need, as kubeadm names them for
// Version and ImageRepository: kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
// pause and (unless CoreDNS is false) CoreDNS. With the default repository CoreDNS lives at
// registry.k8s.io/coredns/coredns, elsewhere at <repository>/coredns (kubeadm's rule). It returns
// nil for an unsupported or malformed Version (Validate reports it).
func (k *Kubernetes) KubeImages() []string {
	minor, ok := kubeMinor(k.Version)
	set, known := kubeImageSets[minor]
	if !ok || !known {
		return nil
	}
	repo := k.ImageRepository
	if repo == "" {
		repo = DefaultImageRepository
	}
	var out []string
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		out = append(out, repo+"/"+c+":"+k.Version)
	}
	out = append(out, repo+"/pause:"+set.Pause)
	if k.CoreDNSEnabled() {
		dns := repo + "/coredns"
		if repo == DefaultImageRepository {
			dns += "/coredns"
		}
		out = append(out, dns+":"+set.CoreDNS)
	}
	return out
}

// PauseImage returns the pod sandbox image (containerd's sandbox_image), "" for an unsupported Version.
func (k *Kubernetes) PauseImage() string {
	for _, img := range k.KubeImages() {
		if name, _, _ := cutTag(img); hasSuffixPath(name, "pause") {
			return img
		}
	}
	return ""
}

// CoreDNSEnabled reports whether the CoreDNS addon is deployed (CoreDNS unset or true).
func (k *Kubernetes) CoreDNSEnabled() bool { return k.CoreDNS == nil || *k.CoreDNS }

// KubeNodes returns the hosts that are Kubernetes nodes (role control-plane or worker), in spec
// order; nil without spec.kubernetes.
func (c *Cluster) KubeNodes() []Host {
	if c.Spec.Kubernetes == nil {
		return nil
	}
	var out []Host
	for _, h := range c.Spec.Hosts {
		if h.HasRole(RoleControlPlane) || h.HasRole(RoleWorker) {
			out = append(out, h)
		}
	}
	return out
}

// WorkerHosts returns the hosts with role worker, in spec order.
func (c *Cluster) WorkerHosts() []Host { return c.hostsWith(RoleWorker) }

// setDefaults fills spec.kubernetes' defaults (see SetDefaults) and returns its local paths for
// resolving.
func (k *Kubernetes) setDefaults(lb *LoadBalancer) []*string {
	if k.KubeletVersion == "" {
		k.KubeletVersion = k.Version
	}
	if k.ImageRepository == "" {
		k.ImageRepository = DefaultImageRepository
	}
	if k.PodSubnet == "" {
		k.PodSubnet = DefaultPodSubnet
	}
	if k.ServiceSubnet == "" {
		k.ServiceSubnet = DefaultServiceSubnet
	}
	if k.NodeCIDRMaskSize == 0 {
		k.NodeCIDRMaskSize = DefaultNodeCIDRMaskSize
		if p, err := netip.ParsePrefix(k.PodSubnet); err == nil && p.Addr().Is6() {
			k.NodeCIDRMaskSize = DefaultNodeCIDRMaskV6
		}
	}
	if k.CNI == "" {
		k.CNI = DefaultCNI
	}
	if k.NodeSubnet == "" && lb != nil {
		if p, err := netip.ParsePrefix(CanonicalPrefix(lb.VIP)); err == nil {
			k.NodeSubnet = p.Masked().String()
		}
	}
	for _, d := range []*Download{k.Download.Kubelet, k.Download.Kubeadm, k.Download.Kubectl} {
		if d != nil {
			d.SHA256 = strings.ToLower(d.SHA256)
		}
	}
	paths := []*string{&k.Binaries.Kubelet, &k.Binaries.Kubeadm, &k.Binaries.Kubectl, &k.KubeletConfigurationFile}
	for i := range k.ImageArchives {
		paths = append(paths, &k.ImageArchives[i])
	}
	return paths
}
