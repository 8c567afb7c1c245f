package v1alpha1

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/hactl/hactl/api/limits"
)

func cniModes() []string      { return []string{CNIBridge, CNINone} }
func cgroupDrivers() []string { return []string{CgroupDriverSystemd, CgroupDriverCgroupfs} }

// kubeMinor returns "MAJOR.MINOR" of a "vMAJOR.MINOR.PATCH[-pre]" version (semver's rules); false
// when v is not one.
func kubeMinor(v string) (string, bool) {
	p := semver(v)
	if p == nil {
		return "", false
	}
	return minorOf(p), true
}

// minorOf is v's "MAJOR.MINOR".
func minorOf(v *version.Version) string { return fmt.Sprintf("%d.%d", v.Major(), v.Minor()) }

// semver parses a "vMAJOR.MINOR.PATCH[-pre]" release version (versionRE's shape, then semver's rules
// through k8s.io/apimachinery/pkg/util/version: no leading zeros); nil when v is not one.
func semver(v string) *version.Version {
	if !versionRE.MatchString(v) {
		return nil
	}
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		return nil
	}
	return parsed
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// kubePortClash says why port can't be a load balancer port on a Kubernetes node ("" when it can).
func kubePortClash(port int) string {
	switch {
	case port == limits.KubeletPort:
		return fmt.Sprintf("%d is kubelet's port on every Kubernetes node", port)
	case port == limits.KubeControllerManagerPort:
		return fmt.Sprintf("%d is kube-controller-manager's port on the control planes", port)
	case port == limits.KubeSchedulerPort:
		return fmt.Sprintf("%d is kube-scheduler's port on the control planes", port)
	case port >= limits.NodePortMin && port <= limits.NodePortMax:
		return fmt.Sprintf("%d is in the NodePort range %d-%d that kube-proxy serves on every node", port, limits.NodePortMin, limits.NodePortMax)
	}
	return ""
}

// cutTag splits an image reference "repo/name:tag" at the tag's colon (a port's colon in the
// registry part is not a tag).
func cutTag(ref string) (name, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i+1:], "/") {
		return ref, "", false
	}
	return ref[:i], ref[i+1:], true
}

// hasSuffixPath reports whether image name n ends in the path element last.
func hasSuffixPath(n, last string) bool { return n == last || strings.HasSuffix(n, "/"+last) }

var imageRepoRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)

// labelValueRE is a Kubernetes label value (apimachinery's validation.IsValidLabelValue).
var labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

// kubernetes checks spec.kubernetes (defaulted) and the roles that need it.
//
// Rules: version is a release of a SupportedKubernetesMinors minor; kubeletVersion follows the
// version-skew policy (never newer than the control plane, at most limits.MaxKubeletMinorSkew minors
// older); kubelet, kubeadm and kubectl each come from exactly one of binaries and download (URL and
// sha256 as for spec.etcd.download); podSubnet and serviceSubnet are CIDRs (network addresses) of one
// family, disjoint, holding no host address, VIP or nodeSubnet, the pod subnet big enough for one
// /nodeCIDRMaskSize per node (at most limits.MaxNodeCIDRBits longer), the service subnet at most
// limits.MaxServiceSubnetHostBits host bits; cni bridge needs every node inside nodeSubnet (one L2
// segment); several control-plane hosts need spec.loadBalancer (kubeadm's controlPlaneEndpoint);
// workers need a control-plane host; zones (and region) are label values (they label the nodes).
func (v *validator) kubernetes(c *Cluster, p *field.Path) {
	k := c.Spec.Kubernetes
	hostsPath := field.NewPath("spec", "hosts")
	if k == nil {
		for i, h := range c.Spec.Hosts {
			if h.HasRole(RoleWorker) {
				v.add(field.Invalid(hostsPath.Index(i).Child("roles"), string(RoleWorker), "a worker is a Kubernetes node: add spec.kubernetes (version, binaries or download) or drop the role"))
			}
		}
		return
	}
	for i, h := range c.Spec.Hosts {
		if h.HasRole(RoleWorker) && h.HasRole(RoleControlPlane) {
			v.add(field.Invalid(hostsPath.Index(i).Child("roles"), string(RoleWorker), "a control-plane host is a Kubernetes node already: give it control-plane or worker, not both"))
		}
	}
	cps := c.ControlPlaneHosts()
	switch {
	case len(cps) == 0 && len(c.WorkerHosts()) > 0:
		v.add(field.Required(hostsPath, "workers join a control plane: give at least one host the role control-plane"))
	case len(cps) == 0:
		v.add(field.Required(hostsPath, "spec.kubernetes needs at least one host with role control-plane"))
	case len(cps) > 1 && c.Spec.LoadBalancer == nil:
		v.add(field.Required(field.NewPath("spec", "loadBalancer"), fmt.Sprintf("%d control-plane hosts need a load balancer: kubeadm's controlPlaneEndpoint is its VIP, and every node reaches the API through it; add spec.loadBalancer (vip, e.g. 10.0.0.100/24)", len(cps))))
	}

	// Versions.
	vp := p.Child("version")
	cpVer := semver(k.Version)
	cpOK := cpVer != nil
	switch {
	case k.Version == "":
		v.add(field.Required(vp, "set the Kubernetes release, e.g. v1.37.2"))
	case !cpOK:
		v.add(field.Invalid(vp, k.Version, "must be a release version such as v1.37.2"))
	case !slices.Contains(SupportedKubernetesMinors(), minorOf(cpVer)):
		v.add(field.Invalid(vp, k.Version, fmt.Sprintf("hactl knows the images of Kubernetes %s only", strings.Join(SupportedKubernetesMinors(), ", "))))
		cpOK = false
	}
	kp := p.Child("kubeletVersion")
	if kv := semver(k.KubeletVersion); kv == nil && k.KubeletVersion != k.Version {
		v.add(field.Invalid(kp, k.KubeletVersion, "must be a release version such as v1.37.2"))
	} else if kv != nil && cpOK {
		// A release is newer than its pre-releases (semver §11).
		cpMinor, kvMinor := int(cpVer.Minor()), int(kv.Minor())
		switch {
		case kv.GreaterThan(cpVer):
			v.add(field.Invalid(kp, k.KubeletVersion, fmt.Sprintf("kubelet must not be newer than the control plane (%s): Kubernetes' version-skew policy; upgrade the control plane first", k.Version)))
		case kv.Major() != cpVer.Major():
			v.add(field.Invalid(kp, k.KubeletVersion, fmt.Sprintf("kubelet must be of the control plane's major version (%s): Kubernetes' version-skew policy", k.Version)))
		case cpMinor-kvMinor > limits.MaxKubeletMinorSkew:
			v.add(field.Invalid(kp, k.KubeletVersion, fmt.Sprintf("kubelet may be at most %d minor versions older than the control plane (%s): Kubernetes' version-skew policy; use v%d.%d or newer",
				limits.MaxKubeletMinorSkew, k.Version, cpVer.Major(), cpMinor-limits.MaxKubeletMinorSkew)))
		}
	}

	// Artifacts.
	for _, a := range []struct {
		name  string
		local string
		dl    *Download
	}{{"kubelet", k.Binaries.Kubelet, k.Download.Kubelet}, {"kubeadm", k.Binaries.Kubeadm, k.Download.Kubeadm}, {"kubectl", k.Binaries.Kubectl, k.Download.Kubectl}} {
		bp, dp := p.Child("binaries", a.name), p.Child("download", a.name)
		switch {
		case a.local == "" && a.dl == nil:
			v.add(field.Required(bp, fmt.Sprintf("set the local %s binary, or %s with url and sha256 (e.g. https://dl.k8s.io/release/%s/bin/linux/amd64/%s)", a.name, dp, orExample(k.Version), a.name)))
		case a.local != "" && a.dl != nil:
			v.add(field.Invalid(dp, "", fmt.Sprintf("%s comes from %s or from a download, not both: remove one", a.name, bp)))
		case a.dl != nil:
			v.add(checkDownload(dp, a.dl.URL, a.dl.SHA256,
				fmt.Sprintf("set the http(s) URL of %s, e.g. https://dl.k8s.io/release/v1.37.2/bin/linux/amd64/%s, or an internal mirror's", a.name, a.name),
				a.name, fmt.Sprintf("the release's %s.sha256 file or `sha256sum %s`", a.name, a.name))...)
		}
	}

	// Runtime, images.
	if d := k.Runtime.CgroupDriver; d != "" && !slices.Contains(cgroupDrivers(), d) {
		v.add(field.NotSupported(p.Child("runtime", "cgroupDriver"), d, cgroupDrivers()))
	}
	if !imageRepoRE.MatchString(k.ImageRepository) {
		v.add(field.Invalid(p.Child("imageRepository"), k.ImageRepository, "must be a registry host with an optional port and path, without scheme, e.g. registry.k8s.io or registry.example.com:5000/k8s"))
	}
	seen := map[string]int{}
	for i, a := range k.ImageArchives {
		ap := p.Child("imageArchives").Index(i)
		if a == "" {
			v.add(field.Required(ap, "give the path of a `docker save` tarball"))
		} else if j, dup := seen[a]; dup {
			e := field.Duplicate(ap, a)
			e.Detail = fmt.Sprintf("already listed at %s", p.Child("imageArchives").Index(j))
			v.add(e)
		} else {
			seen[a] = i
		}
	}
	checks := map[string]int{} // kubeadm lower-cases the names and keeps each once
	for i, e := range k.IgnorePreflightErrors {
		ip := p.Child("ignorePreflightErrors").Index(i)
		if strings.TrimSpace(e) == "" || strings.ContainsAny(e, ", \t") {
			v.add(field.Invalid(ip, e, "give one kubeadm preflight check name per entry, e.g. Swap or SystemVerification"))
		} else if j, dup := checks[strings.ToLower(e)]; dup {
			d := field.Duplicate(ip, e)
			d.Detail = fmt.Sprintf("already listed at %s (kubeadm compares the names without case and keeps each once); list each check once", p.Child("ignorePreflightErrors").Index(j))
			v.add(d)
		} else {
			checks[strings.ToLower(e)] = i
		}
	}

	// Networks.
	nodes := c.KubeNodes()
	pod, podErr := parseCIDR(p.Child("podSubnet"), k.PodSubnet)
	svc, svcErr := parseCIDR(p.Child("serviceSubnet"), k.ServiceSubnet)
	v.add(podErr, svcErr)
	podOK, svcOK := podErr == nil, svcErr == nil
	var nodeNet netip.Prefix
	nodeNetOK := false
	if k.NodeSubnet != "" {
		var err *field.Error
		nodeNet, err = parseCIDR(p.Child("nodeSubnet"), k.NodeSubnet)
		v.add(err)
		nodeNetOK = err == nil
	}
	if podOK && svcOK {
		switch {
		case pod.Addr().Is4() != svc.Addr().Is4():
			v.add(field.Invalid(p.Child("serviceSubnet"), k.ServiceSubnet, fmt.Sprintf("must be of the pod subnet's address family (%s): hactl builds single-stack clusters", k.PodSubnet)))
		case pod.Overlaps(svc):
			v.add(field.Invalid(p.Child("podSubnet"), k.PodSubnet, fmt.Sprintf("overlaps serviceSubnet %s: pods and Services need separate ranges", k.ServiceSubnet)))
		}
	}
	var vip netip.Addr
	if lb := c.Spec.LoadBalancer; lb != nil {
		if pr, err := netip.ParsePrefix(lb.VIP); err == nil {
			vip = pr.Addr()
		}
	}
	// Single-stack: the pods and Services are of the nodes' address family (kube-apiserver refuses
	// a service range of another family than its advertise address).
	if podOK {
		for i, h := range c.Spec.Hosts {
			if !h.HasRole(RoleControlPlane) && !h.HasRole(RoleWorker) {
				continue
			}
			if a, err := netip.ParseAddr(h.Address); err == nil && a.Is4() != pod.Addr().Is4() {
				v.add(field.Invalid(p.Child("podSubnet"), k.PodSubnet, fmt.Sprintf("is of another address family than the nodes (%s: %s): hactl builds single-stack clusters; use an %s pod and service subnet", hostsPath.Index(i), h.Address, familyName(a))))
				podOK, svcOK = false, false
				break
			}
		}
	}
	for _, s := range []struct {
		path *field.Path
		val  string
		pr   netip.Prefix
		ok   bool
	}{{p.Child("podSubnet"), k.PodSubnet, pod, podOK}, {p.Child("serviceSubnet"), k.ServiceSubnet, svc, svcOK}} {
		if !s.ok {
			continue
		}
		if vip.IsValid() && s.pr.Contains(vip) {
			v.add(field.Invalid(s.path, s.val, fmt.Sprintf("contains the load balancer VIP %s: choose a range the hosts' network doesn't use", vip)))
			continue
		}
		if nodeNetOK && s.pr.Overlaps(nodeNet) {
			v.add(field.Invalid(s.path, s.val, fmt.Sprintf("overlaps nodeSubnet %s, the hosts' network: choose a range it doesn't use", nodeNet)))
			continue
		}
		for _, h := range c.Spec.Hosts {
			if a, err := netip.ParseAddr(h.Address); err == nil && s.pr.Contains(a) {
				v.add(field.Invalid(s.path, s.val, fmt.Sprintf("contains host %s's address %s: choose a range the hosts' network doesn't use", h.Name, a)))
				break
			}
		}
	}
	mp := p.Child("nodeCIDRMaskSize")
	if podOK {
		bits := pod.Addr().BitLen()
		switch diff := k.NodeCIDRMaskSize - pod.Bits(); {
		case k.NodeCIDRMaskSize < pod.Bits() || k.NodeCIDRMaskSize > bits-2:
			v.add(field.Invalid(mp, k.NodeCIDRMaskSize, fmt.Sprintf("must be between the pod subnet's prefix length (%d) and %d", pod.Bits(), bits-2)))
		case diff > limits.MaxNodeCIDRBits:
			v.add(field.Invalid(mp, k.NodeCIDRMaskSize, fmt.Sprintf("may be at most %d bits longer than podSubnet's /%d (kube-controller-manager's limit): use a smaller podSubnet or a mask of at most /%d",
				limits.MaxNodeCIDRBits, pod.Bits(), pod.Bits()+limits.MaxNodeCIDRBits)))
		case diff < 62 && len(nodes) > 1<<diff:
			v.add(field.Invalid(p.Child("podSubnet"), k.PodSubnet, fmt.Sprintf("holds %d node ranges of /%d, too few for the %d Kubernetes nodes: use a larger podSubnet (e.g. /%d) or a longer nodeCIDRMaskSize",
				1<<diff, k.NodeCIDRMaskSize, len(nodes), k.NodeCIDRMaskSize-bitsFor(len(nodes)))))
		}
	}
	if svcOK {
		minBits := limits.MinServiceSubnetHostBits
		if k.CoreDNSEnabled() {
			minBits = limits.MinServiceSubnetHostBitsDNS
		}
		switch host := svc.Addr().BitLen() - svc.Bits(); {
		case host > limits.MaxServiceSubnetHostBits:
			v.add(field.Invalid(p.Child("serviceSubnet"), k.ServiceSubnet, fmt.Sprintf("has %d host bits; kube-apiserver takes at most %d (e.g. /%d)", host, limits.MaxServiceSubnetHostBits, svc.Addr().BitLen()-limits.MaxServiceSubnetHostBits)))
		case host < minBits:
			v.add(field.Invalid(p.Child("serviceSubnet"), k.ServiceSubnet, fmt.Sprintf("has %d host bits, too few: the kubernetes Service takes its first address and CoreDNS its tenth; use at least /%d", host, svc.Addr().BitLen()-minBits)))
		}
	}
	// The load balancer's ports on Kubernetes nodes must leave kubelet's, the control plane's and
	// the NodePort range alone (HAProxy would take them first: kube/preflight sees them free).
	if lb := c.Spec.LoadBalancer; lb != nil {
		onNodes := false
		for _, h := range c.LBHosts() {
			onNodes = onNodes || h.HasRole(RoleControlPlane) || h.HasRole(RoleWorker)
		}
		lp := field.NewPath("spec", "loadBalancer")
		for _, pc := range []struct {
			name string
			port int
			all  bool // the port is on every control-plane node (the apiserver's), not only the LB hosts
		}{{"frontendPort", lb.FrontendPort, false}, {"apiServerPort", lb.APIServerPort, true}} {
			if !onNodes && !pc.all {
				continue
			}
			if msg := kubePortClash(pc.port); msg != "" {
				v.add(field.Invalid(lp.Child(pc.name), pc.port, msg))
			}
		}
	}

	cp := p.Child("cni")
	switch {
	case !slices.Contains(cniModes(), k.CNI):
		v.add(field.NotSupported(cp, k.CNI, cniModes()))
	case k.CNI == CNIBridge && len(nodes) > 1 && k.NodeSubnet == "":
		v.add(field.Required(p.Child("nodeSubnet"), "cni bridge routes the nodes' pod ranges over one L2 segment: set nodeSubnet (the hosts' network, e.g. 10.0.0.0/24), or add spec.loadBalancer whose VIP prefix gives it"))
	case k.CNI == CNIBridge && nodeNetOK:
		for i, h := range c.Spec.Hosts {
			if !h.HasRole(RoleControlPlane) && !h.HasRole(RoleWorker) {
				continue
			}
			name, addr := "address", h.Address
			if h.PrivateAddress != "" {
				name, addr = "privateAddress", h.PrivateAddress // the node IP: the routes' next hop
			}
			if a, err := netip.ParseAddr(addr); err == nil && !nodeNet.Contains(a) {
				v.add(field.Invalid(hostsPath.Index(i).Child(name), addr, fmt.Sprintf("cni bridge needs every node on one L2 segment (%s, spec.kubernetes.nodeSubnet): this host is outside it; use cni: none with a routed CNI (Calico, Cilium) for nodes in several subnets", nodeNet)))
			}
		}
	}

	for i, h := range c.Spec.Hosts {
		if (h.HasRole(RoleControlPlane) || h.HasRole(RoleWorker)) && !labelValueRE.MatchString(h.Zone) {
			v.add(field.Invalid(hostsPath.Index(i).Child("zone"), h.Zone, "labels the node topology.kubernetes.io/zone: at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit"))
		}
	}
	if k.Region != "" && (len(k.Region) > 63 || !labelValueRE.MatchString(k.Region)) {
		v.add(field.Invalid(p.Child("region"), k.Region, "labels the nodes topology.kubernetes.io/region: at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit"))
	}
}

// parseCIDR parses the network CIDR s at p: the address must be the network's first (as kubeadm
// and kube-controller-manager expect). It returns the prefix and nil, or an Invalid error at p
// (the prefix is then not to be used).
func parseCIDR(p *field.Path, s string) (netip.Prefix, *field.Error) {
	pr, err := netip.ParsePrefix(s)
	if err != nil {
		return pr, field.Invalid(p, s, "must be a CIDR such as 10.244.0.0/16")
	}
	if pr.Masked() != pr {
		return pr, field.Invalid(p, s, fmt.Sprintf("has host bits set; did you mean %s?", pr.Masked()))
	}
	return pr, nil
}

// bitsFor returns how many bits count n distinct values.
func bitsFor(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

func orExample(v string) string {
	if v == "" {
		return "v1.37.2"
	}
	return v
}
