package kubeadm

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
)

// Labels hactl gives every node (kubelet's --node-labels; the NodeRestriction admission plugin lets
// a kubelet set these topology labels on its own Node).
const (
	ZoneLabel   = "topology.kubernetes.io/zone"
	RegionLabel = "topology.kubernetes.io/region"
)

// KubeProxyAPIVersion is the kube-proxy configuration API hactl renders.
const KubeProxyAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"

// TokenTTL is how long a bootstrap token hactl creates for a run's joins stays valid: long enough
// for every join of one run, short enough that a leaked token is soon useless (kubeadm's default
// is 24 h). The certificate key's uploaded certificates expire after 2 h (kubeadm's
// kubeadm-certs Secret).
const TokenTTL = "1h"

// Secrets are a run's join credentials: a bootstrap token ("abcdef.0123456789abcdef") and a
// certificate key (64 hex digits, the AES key of the uploaded control-plane certificates). They go
// only into configuration files written 0600 on the hosts, never on a command line.
type Secrets struct {
	Token          string
	CertificateKey string
}

// NewSecrets returns fresh random join credentials. Errors: the system's random source failed.
func NewSecrets() (Secrets, error) {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 22+32)
	if _, err := rand.Read(b); err != nil {
		return Secrets{}, err
	}
	tok := make([]byte, 22)
	for i := range tok {
		tok[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return Secrets{Token: string(tok[:6]) + "." + string(tok[6:]), CertificateKey: hex.EncodeToString(b[22:])}, nil
}

// NodeParams are the per-run choices that come from the hosts' facts rather than the spec.
type NodeParams struct {
	// CgroupDriver is kubelet's and containerd's driver (systemd or cgroupfs).
	CgroupDriver string
	// CgroupV1: the hosts run cgroup v1 (kubelet 1.35+ refuses it unless failCgroupV1 is false).
	CgroupV1 bool
	// ImagePullPolicy is nodeRegistration.imagePullPolicy: Never when images come from archives.
	ImagePullPolicy string
	// Kubelet is the user's KubeletConfiguration (specload.ReadKubeletConfiguration), merged over
	// hactl's; nil for none.
	Kubelet map[string]any
}

// CACertHash returns kubeadm's discovery hash of a PEM CA certificate: "sha256:" + the hex SHA-256
// of its DER SubjectPublicKeyInfo (kubeadm's pubkeypin).
func CACertHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("cluster CA: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("cluster CA: %w", err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// specOptions are the Options spec.kubernetes gives.
func specOptions(c *v1alpha1.Cluster, p NodeParams) Options {
	k := c.Spec.Kubernetes
	return Options{KubernetesVersion: k.Version, PodSubnet: k.PodSubnet, ServiceSubnet: k.ServiceSubnet,
		ImagePullPolicy: p.ImagePullPolicy, IgnorePreflightErrors: k.IgnorePreflightErrors, CRISocket: DefaultCRISocket}
}

// Endpoint returns the address:port every node reaches the API at: spec.loadBalancer.external's
// address:port, the VIP:frontendPort of hactl's load balancer, else the only control-plane host's
// address at the apiserver port.
func Endpoint(c *v1alpha1.Cluster) (string, error) {
	if lb := c.Spec.LoadBalancer; lb != nil {
		host, port, ok := c.APIEndpoint()
		switch {
		case !ok && lb.External != nil:
			return "", errors.New("spec.loadBalancer.external.address is empty")
		case !ok:
			return "", fmt.Errorf("spec.loadBalancer.vip %q is not an address with its prefix length", lb.VIP)
		}
		if a, err := netip.ParseAddr(host); err == nil {
			host = a.Unmap().String()
		}
		return net.JoinHostPort(host, strconv.Itoa(port)), nil
	}
	cps := c.ControlPlaneHosts()
	if len(cps) != 1 {
		return "", fmt.Errorf("%d control-plane hosts and no spec.loadBalancer", len(cps))
	}
	return net.JoinHostPort(cps[0].Address, strconv.Itoa(DefaultAPIServerPort)), nil
}

// registration returns node h's nodeRegistration: its name, containerd's socket, the zone (and
// region) labels and its address as kubelet's node IP.
func registration(c *v1alpha1.Cluster, h v1alpha1.Host, o Options) NodeRegistrationOptions {
	labels := ZoneLabel + "=" + h.Zone
	if r := c.Spec.Kubernetes.Region; r != "" {
		labels += "," + RegionLabel + "=" + r
	}
	return NodeRegistrationOptions{
		Name: h.Name, CRISocket: o.CRISocket, ImagePullPolicy: o.ImagePullPolicy,
		IgnorePreflightErrors: o.IgnorePreflightErrors,
		KubeletExtraArgs:      []Arg{{Name: "node-ip", Value: h.PeerAddress()}, {Name: "node-labels", Value: labels}},
	}
}

// clusterDocs returns the ClusterConfiguration, KubeletConfiguration and KubeProxyConfiguration
// documents of spec.kubernetes.
func clusterDocs(c *v1alpha1.Cluster, o Options, p NodeParams) (*ClusterConfiguration, map[string]any, *KubeProxyConfiguration, error) {
	k := c.Spec.Kubernetes
	if k == nil {
		return nil, nil, nil, errors.New("kubeadm: the spec has no spec.kubernetes")
	}
	var cluster *ClusterConfiguration
	if c.Spec.LoadBalancer != nil {
		var err error
		if _, cluster, err = documents(c, o); err != nil {
			return nil, nil, nil, err
		}
	} else {
		// One control plane without a load balancer: the endpoint is its own address.
		cps := c.ControlPlaneHosts()
		members, err := membersOf(c)
		if err != nil {
			return nil, nil, nil, err
		}
		ep, err := Endpoint(c)
		if err != nil {
			return nil, nil, nil, err
		}
		cluster = &ClusterConfiguration{
			TypeMeta:    TypeMeta{APIVersion: APIVersion, Kind: "ClusterConfiguration"},
			ClusterName: c.Metadata.Name, KubernetesVersion: k.Version, ControlPlaneEndpoint: ep,
			Etcd:       Etcd{External: &ExternalEtcd{Endpoints: members, CAFile: EtcdCAFile, CertFile: EtcdClientCertFile, KeyFile: EtcdClientKeyFile}},
			Networking: Networking{PodSubnet: k.PodSubnet, ServiceSubnet: k.ServiceSubnet},
			APIServer:  APIServer{CertSANs: []string{cps[0].Address}},
		}
	}
	cluster.ImageRepository = k.ImageRepository
	cluster.ControllerManager = &ControlPlaneComponent{ExtraArgs: []Arg{{Name: "node-cidr-mask-size", Value: strconv.Itoa(k.NodeCIDRMaskSize)}}}
	if !k.CoreDNSEnabled() {
		cluster.DNS = &DNS{Disabled: true}
	}
	kubelet := map[string]any{"apiVersion": KubeletAPIVersion, "kind": KubeletKind, "cgroupDriver": p.CgroupDriver}
	if p.CgroupV1 {
		kubelet["failCgroupV1"] = false
	}
	maps.Copy(kubelet, p.Kubelet) // the user's file over hactl's (it may not set cgroupDriver: specload)
	kubelet["cgroupDriver"] = p.CgroupDriver
	proxy := &KubeProxyConfiguration{TypeMeta: TypeMeta{APIVersion: KubeProxyAPIVersion, Kind: "KubeProxyConfiguration"}, Mode: "iptables", ClusterCIDR: k.PodSubnet}
	return cluster, kubelet, proxy, nil
}

// InitConfig renders `kubeadm init --config` for control-plane host node (InitConfiguration with
// s's bootstrap token and certificate key, ClusterConfiguration, KubeletConfiguration,
// KubeProxyConfiguration). The same documents serve `kubeadm token create --config` and `kubeadm
// init phase upload-certs --upload-certs --config` on a running control plane: they create s's
// token and upload the certificates under s's key. It holds secrets: write it 0600 and remove it.
//
// Errors: the spec lacks spec.kubernetes or what kubeadm needs (a *v1alpha1.ValidationError or
// *OptionError, exit 2), or node is no control-plane host.
func InitConfig(c *v1alpha1.Cluster, node string, p NodeParams, s Secrets) ([]byte, error) {
	o, err := specOptions(c, p).withDefaults()
	if err != nil {
		return nil, err
	}
	h, ok := hostNamed(c, node)
	if !ok || !h.HasRole(v1alpha1.RoleControlPlane) {
		return nil, fmt.Errorf("kubeadm init: %s is not a control-plane host of the spec", node)
	}
	cluster, kubelet, proxy, err := clusterDocs(c, o, p)
	if err != nil {
		return nil, err
	}
	init := &InitConfiguration{
		TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: "InitConfiguration"},
		BootstrapTokens: []BootstrapToken{{Token: s.Token, TTL: TokenTTL, Description: "hactl: joins of one bootstrap run",
			Usages: []string{"signing", "authentication"}, Groups: []string{"system:bootstrappers:kubeadm:default-node-token"}}},
		NodeRegistration: registration(c, h, o),
		LocalAPIEndpoint: APIEndpoint{AdvertiseAddress: h.Address, BindPort: int32(c.APIServerPort())},
		CertificateKey:   s.CertificateKey,
	}
	return marshalDocs(init, cluster, kubelet, proxy)
}

// JoinConfig renders `kubeadm join --config` for node (a control-plane host joins with
// controlPlane and the certificate key; a worker without): discovery through the endpoint with s's
// token, trusting the CA whose hash is caCertHash. It holds secrets: write it 0600 and remove it.
func JoinConfig(c *v1alpha1.Cluster, node string, p NodeParams, s Secrets, caCertHash string) ([]byte, error) {
	o, err := specOptions(c, p).withDefaults()
	if err != nil {
		return nil, err
	}
	h, ok := hostNamed(c, node)
	if !ok {
		return nil, fmt.Errorf("kubeadm join: %s is not a host of the spec", node)
	}
	ep, err := Endpoint(c)
	if err != nil {
		return nil, err
	}
	j := &JoinConfiguration{
		TypeMeta:         TypeMeta{APIVersion: APIVersion, Kind: "JoinConfiguration"},
		NodeRegistration: registration(c, h, o),
		Discovery:        Discovery{BootstrapToken: &BootstrapTokenDiscovery{Token: s.Token, APIServerEndpoint: ep, CACertHashes: []string{caCertHash}}},
	}
	if h.HasRole(v1alpha1.RoleControlPlane) {
		j.ControlPlane = &JoinControlPlane{LocalAPIEndpoint: APIEndpoint{AdvertiseAddress: h.Address, BindPort: int32(c.APIServerPort())}, CertificateKey: s.CertificateKey}
	}
	return marshalDocs(j)
}

// KubeletConfigOf returns the KubeletConfiguration document InitConfig renders (for the plan and
// for comparing with a node's).
func KubeletConfigOf(c *v1alpha1.Cluster, p NodeParams) (map[string]any, error) {
	o, err := specOptions(c, p).withDefaults()
	if err != nil {
		return nil, err
	}
	_, kubelet, _, err := clusterDocs(c, o, p)
	return kubelet, err
}

func hostNamed(c *v1alpha1.Cluster, name string) (v1alpha1.Host, bool) {
	for _, h := range c.Spec.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return v1alpha1.Host{}, false
}

func marshalDocs(docs ...any) ([]byte, error) {
	var out bytes.Buffer
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("kubeadm config: %w", err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// Redact replaces s's token and certificate key in text (command errors quote output) with
// placeholders.
func (s Secrets) Redact(text string) string {
	for _, v := range []string{s.Token, s.CertificateKey} {
		if v != "" {
			text = strings.ReplaceAll(text, v, "<redacted>")
		}
	}
	return text
}

// membersOf returns the etcd client URLs of the spec's members.
func membersOf(c *v1alpha1.Cluster) ([]string, error) {
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return nil, err
	}
	if len(members) == 0 {
		return nil, errors.New("no host has role etcd: kubeadm's external etcd needs hactl's members")
	}
	return etcd.ClientURLs(members), nil
}

// ClusterConfig renders spec.kubernetes' ClusterConfiguration alone (for `kubeadm kubeconfig user
// --config` and other commands that need the cluster's name and endpoint, no node and no secret).
func ClusterConfig(c *v1alpha1.Cluster) ([]byte, error) {
	p := NodeParams{CgroupDriver: v1alpha1.CgroupDriverSystemd}
	o, err := specOptions(c, p).withDefaults()
	if err != nil {
		return nil, err
	}
	cluster, _, _, err := clusterDocs(c, o, p)
	if err != nil {
		return nil, err
	}
	return marshalDocs(cluster)
}
