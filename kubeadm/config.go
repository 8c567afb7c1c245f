// Package kubeadm renders the kubeadm configuration (API kubeadm.k8s.io/v1beta4) for a Kubernetes
// control plane built on hactl's etcd cluster and load balancer: an InitConfiguration for the first
// control-plane host and a ClusterConfiguration whose controlPlaneEndpoint is the load balancer's VIP
// and whose etcd is external (hactl's members, reached with the apiserver-etcd-client certificate).
//
// It uses small typed structs mirroring the fields it sets (see types.go) instead of kubeadm's own
// Go types, so k8s.io/kubernetes stays out of hactl's module; the output is checked against the real
// `kubeadm config validate` in this package's tests.
package kubeadm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
)

// Defaults for Options (and for the load balancer ports when the spec leaves them 0).
const (
	// DefaultKubernetesVersion is the Kubernetes version hactl's tools module pins
	// (tools/kubernetes/go.mod).
	DefaultKubernetesVersion = "v1.37.2"
	// DefaultServiceSubnet is kubeadm's own default service CIDR.
	DefaultServiceSubnet = "10.96.0.0/12"
	// DefaultPodSubnet is the pod CIDR hactl asks for when none is given (kubeadm has no default;
	// node IPAM in kube-controller-manager needs one to hand out per-node pod CIDRs).
	DefaultPodSubnet = "10.244.0.0/16"
	// DefaultCRISocket is containerd's socket, the runtime hactl's hosts run.
	DefaultCRISocket = "unix:///run/containerd/containerd.sock"
	// DefaultAPIServerPort and DefaultFrontendPort are spec.loadBalancer's documented defaults.
	DefaultAPIServerPort = 6443
	DefaultFrontendPort  = 6443
)

// Paths kubeadm uses for an external etcd's client credentials (kubeadm's defaults under
// certificatesDir /etc/kubernetes/pki: constants.EtcdCACertName, APIServerEtcdClientCertName and
// APIServerEtcdClientKeyName). hactl's pki package issues these as the etcd CA and the
// "apiserver-etcd-client" client certificate; they must be installed at these paths on every
// control-plane host before `kubeadm init` / `kubeadm join --control-plane`.
const (
	EtcdCAFile         = "/etc/kubernetes/pki/etcd/ca.crt"
	EtcdClientCertFile = "/etc/kubernetes/pki/apiserver-etcd-client.crt"
	EtcdClientKeyFile  = "/etc/kubernetes/pki/apiserver-etcd-client.key"
)

// Options are the choices not in the cluster spec. The zero value means every default.
type Options struct {
	// KubernetesVersion is ClusterConfiguration.kubernetesVersion, "vMAJOR.MINOR.PATCH"
	// (default DefaultKubernetesVersion).
	KubernetesVersion string
	// PodSubnet and ServiceSubnet are networking.podSubnet and networking.serviceSubnet, CIDRs
	// (defaults DefaultPodSubnet and DefaultServiceSubnet). They must not overlap each other, and
	// neither may contain a host address or the VIP.
	PodSubnet     string
	ServiceSubnet string
	// ImagePullPolicy is nodeRegistration.imagePullPolicy: "", Always, IfNotPresent or Never
	// ("" leaves kubeadm's default, IfNotPresent; Never for hosts with preloaded images).
	ImagePullPolicy string
	// IgnorePreflightErrors is nodeRegistration.ignorePreflightErrors (kubeadm check names, or "all").
	IgnorePreflightErrors []string
	// CRISocket is nodeRegistration.criSocket (default DefaultCRISocket).
	CRISocket string
	// KubeletConfig is an optional YAML document of kind KubeletConfiguration (apiVersion
	// KubeletAPIVersion), appended as a third document: kubeadm init stores it in the cluster
	// (ConfigMap kubelet-config) and every joining node's kubelet uses it. Nil: kubeadm's defaults.
	// Anything else than one such document is an *OptionError for --kubelet-config.
	KubeletConfig []byte
	// Source names the spec file in spec errors ("file:line: field: message"); may be "".
	Source string
}

// OptionError is a bad Options value (a command-line flag): exit code 2. Flag names the option as
// a command-line flag (e.g. "--pod-subnet").
type OptionError struct {
	Flag string
	Msg  string
}

func (e *OptionError) Error() string { return e.Flag + ": " + e.Msg }

// ExitCode is 2: the input is invalid.
func (e *OptionError) ExitCode() int { return 2 }

var versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// withDefaults fills in the zero fields and checks the values that need no spec.
func (o Options) withDefaults() (Options, error) {
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = DefaultKubernetesVersion
	}
	if o.PodSubnet == "" {
		o.PodSubnet = DefaultPodSubnet
	}
	if o.ServiceSubnet == "" {
		o.ServiceSubnet = DefaultServiceSubnet
	}
	if o.CRISocket == "" {
		o.CRISocket = DefaultCRISocket
	}
	if !versionRE.MatchString(o.KubernetesVersion) {
		return o, &OptionError{"--kubernetes-version", fmt.Sprintf("%q is not a Kubernetes release version such as %s", o.KubernetesVersion, DefaultKubernetesVersion)}
	}
	switch o.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		return o, &OptionError{"--image-pull-policy", fmt.Sprintf("%q: must be Always, IfNotPresent or Never", o.ImagePullPolicy)}
	}
	return o, nil
}

// subnet parses a CIDR option: the address must be the network's first address (as kubeadm and
// kube-controller-manager expect), e.g. 10.244.0.0/16 and not 10.244.1.0/16.
func subnet(flag, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, &OptionError{flag, fmt.Sprintf("%q is not a CIDR such as 10.244.0.0/16", s)}
	}
	if p.Masked() != p {
		return p, &OptionError{flag, fmt.Sprintf("%q has host bits set; did you mean %s?", s, p.Masked())}
	}
	return p, nil
}

// Config renders kubeadm's configuration for cluster c as a multi-document YAML stream:
// an InitConfiguration (for the first control-plane host, in spec order) then a
// ClusterConfiguration, separated by "---". c must be loaded by specload.Load or Decode (defaulted).
//
// Errors: a *v1alpha1.ValidationError (exit code 2, naming the field) when the spec lacks what
// kubeadm needs — spec.loadBalancer missing or its VIP unparsable, no host with role control-plane,
// no etcd host; an *OptionError (exit code 2) for a bad option or a subnet that overlaps the other
// subnet, a host address or the VIP.
func Config(c *v1alpha1.Cluster, opts Options) ([]byte, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	init, cluster, err := documents(c, o)
	if err != nil {
		return nil, err
	}
	docs := []any{init, cluster}
	if o.KubeletConfig != nil {
		kc, err := kubeletConfig(o.KubeletConfig)
		if err != nil {
			return nil, err
		}
		docs = append(docs, kc)
	}
	return marshalDocs(docs...)
}

// KubeletAPIVersion and KubeletKind identify the document Options.KubeletConfig must hold.
const (
	KubeletAPIVersion = "kubelet.config.k8s.io/v1beta1"
	KubeletKind       = "KubeletConfiguration"
)

// kubeletConfig parses Options.KubeletConfig: exactly one YAML document whose apiVersion and kind are
// KubeletAPIVersion and KubeletKind. Its fields are passed through untouched (kubeadm and the
// kubelet validate them; the tests run the real `kubeadm config validate`).
func kubeletConfig(raw []byte) (map[string]any, error) {
	const flag = "--kubelet-config"
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var doc []byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &OptionError{flag, fmt.Sprintf("not YAML: %v", err)}
		}
		var v any
		if yaml.Unmarshal(d, &v) == nil && v == nil {
			continue // empty or only comments
		}
		if doc != nil {
			return nil, &OptionError{flag, "holds more than one YAML document: give only the " + KubeletKind + " document"}
		}
		doc = d
	}
	raw = doc
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, &OptionError{flag, fmt.Sprintf("not YAML: %v", err)}
	}
	if m == nil {
		return nil, &OptionError{flag, "is empty: give a " + KubeletKind + " document (apiVersion " + KubeletAPIVersion + ")"}
	}
	if av, kind := m["apiVersion"], m["kind"]; av != KubeletAPIVersion || kind != KubeletKind {
		return nil, &OptionError{flag, fmt.Sprintf("has apiVersion %v, kind %v: want apiVersion %s, kind %s", av, kind, KubeletAPIVersion, KubeletKind)}
	}
	return m, nil
}

// documents builds the two kubeadm documents from the spec and defaulted options.
func documents(c *v1alpha1.Cluster, o Options) (*InitConfiguration, *ClusterConfiguration, error) {
	var errs field.ErrorList
	specPath := field.NewPath("spec")

	lb := c.Spec.LoadBalancer
	var vip netip.Addr // the managed load balancer's VIP (zero with an external one)
	endpointHost, frontendPort, _ := c.APIEndpoint()
	apiServerPort := c.APIServerPort()
	switch {
	case lb == nil:
		errs = append(errs, field.Required(specPath.Child("loadBalancer"),
			"kubeadm's controlPlaneEndpoint is the load balancer's VIP: add spec.loadBalancer (vip, e.g. 10.0.0.100/24, or external with your load balancer's address)"))
	case lb.External != nil:
		if endpointHost == "" {
			errs = append(errs, field.Required(specPath.Child("loadBalancer", "external", "address"), "set your load balancer's DNS name or IP address"))
		}
		if a, err := netip.ParseAddr(endpointHost); err == nil {
			endpointHost = a.Unmap().String()
		}
	default:
		p, err := netip.ParsePrefix(lb.VIP)
		if err != nil {
			errs = append(errs, field.Invalid(specPath.Child("loadBalancer", "vip"), lb.VIP, "must be an IP address with its prefix length, e.g. 10.0.0.100/24"))
		} else {
			vip = p.Addr().Unmap()
			endpointHost = vip.String()
		}
	}

	var cps []v1alpha1.Host
	var cpAddrs []netip.Addr
	for i, h := range c.Spec.Hosts {
		if !h.HasRole(v1alpha1.RoleControlPlane) {
			continue
		}
		a, err := netip.ParseAddr(h.Address)
		if err != nil {
			errs = append(errs, field.Invalid(specPath.Child("hosts").Index(i).Child("address"), h.Address, "must be an IP address"))
			continue
		}
		cps = append(cps, h)
		cpAddrs = append(cpAddrs, a.Unmap())
	}
	if len(cps) == 0 && len(errs) == 0 {
		errs = append(errs, field.Required(specPath.Child("hosts"),
			"no host has role control-plane: kubeadm needs at least one (add control-plane to a host's roles)"))
	}

	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		errs = append(errs, field.Invalid(specPath.Child("etcd"), "", err.Error()))
	} else if len(members) == 0 {
		errs = append(errs, field.Required(specPath.Child("hosts"), "no host has role etcd: kubeadm's external etcd needs hactl's members"))
	}
	if len(errs) > 0 {
		return nil, nil, c.ValidationError(o.Source, errs)
	}

	if err := checkSubnets(o, c, vip); err != nil {
		return nil, nil, err
	}

	first := cps[0]
	init := &InitConfiguration{
		TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: "InitConfiguration"},
		LocalAPIEndpoint: APIEndpoint{
			AdvertiseAddress: cpAddrs[0].String(),
			BindPort:         int32(apiServerPort),
		},
		NodeRegistration: NodeRegistrationOptions{
			Name:                  first.Name,
			CRISocket:             o.CRISocket,
			ImagePullPolicy:       o.ImagePullPolicy,
			IgnorePreflightErrors: slices.Clone(o.IgnorePreflightErrors),
		},
	}

	// kubeadm adds controlPlaneEndpoint's host to the apiserver certificate too; listing it keeps
	// the SANs readable in the printed configuration.
	sans := []string{endpointHost}
	for _, a := range cpAddrs {
		if s := a.String(); !slices.Contains(sans, s) {
			sans = append(sans, s)
		}
	}
	for _, h := range cps { // kubelet and the nodes may reach an apiserver at its privateAddress
		if a, err := netip.ParseAddr(h.PrivateAddress); err == nil && !slices.Contains(sans, a.Unmap().String()) {
			sans = append(sans, a.Unmap().String())
		}
	}
	cluster := &ClusterConfiguration{
		TypeMeta:             TypeMeta{APIVersion: APIVersion, Kind: "ClusterConfiguration"},
		ClusterName:          c.Metadata.Name,
		KubernetesVersion:    o.KubernetesVersion,
		ControlPlaneEndpoint: net.JoinHostPort(endpointHost, strconv.Itoa(frontendPort)),
		Etcd: Etcd{External: &ExternalEtcd{
			Endpoints: etcd.ClientURLs(members),
			CAFile:    EtcdCAFile,
			CertFile:  EtcdClientCertFile,
			KeyFile:   EtcdClientKeyFile,
		}},
		Networking: Networking{PodSubnet: o.PodSubnet, ServiceSubnet: o.ServiceSubnet},
		APIServer:  APIServer{CertSANs: sans},
	}
	return init, cluster, nil
}

// checkSubnets refuses pod and service subnets that overlap each other or contain a host address
// or the VIP: traffic to those addresses would be routed into the cluster network instead.
func checkSubnets(o Options, c *v1alpha1.Cluster, vip netip.Addr) error {
	pod, err := subnet("--pod-subnet", o.PodSubnet)
	if err != nil {
		return err
	}
	svc, err := subnet("--service-subnet", o.ServiceSubnet)
	if err != nil {
		return err
	}
	if pod.Overlaps(svc) {
		return &OptionError{"--pod-subnet", fmt.Sprintf("%s overlaps the service subnet %s", pod, svc)}
	}
	for _, s := range []struct {
		flag string
		p    netip.Prefix
	}{{"--pod-subnet", pod}, {"--service-subnet", svc}} {
		if s.p.Contains(vip) {
			return &OptionError{s.flag, fmt.Sprintf("%s contains the load balancer VIP %s; choose a range the hosts' network doesn't use", s.p, vip)}
		}
		for _, h := range c.Spec.Hosts {
			if a, err := netip.ParseAddr(h.Address); err == nil && s.p.Contains(a.Unmap()) {
				return &OptionError{s.flag, fmt.Sprintf("%s contains host %s's address %s; choose a range the hosts' network doesn't use", s.p, h.Name, a)}
			}
		}
	}
	return nil
}
