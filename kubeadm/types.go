package kubeadm

// The types below mirror the subset of kubeadm's v1beta4 API (k8s.io/kubernetes
// cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go at v1.37.2) that hactl sets; field names and JSON
// tags are copied from there. Fields hactl doesn't set are left out, so kubeadm applies its own
// defaults to them. `kubeadm config validate` (strict: unknown fields are errors) checks the
// output in this package's tests.

// APIVersion is the kubeadm configuration API version hactl renders.
const APIVersion = "kubeadm.k8s.io/v1beta4"

// TypeMeta is a document's apiVersion and kind.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// InitConfiguration holds what `kubeadm init` needs about the node it runs on.
type InitConfiguration struct {
	TypeMeta         `json:",inline"`
	BootstrapTokens  []BootstrapToken        `json:"bootstrapTokens,omitempty"`
	NodeRegistration NodeRegistrationOptions `json:"nodeRegistration"`
	LocalAPIEndpoint APIEndpoint             `json:"localAPIEndpoint"`
	CertificateKey   string                  `json:"certificateKey,omitempty"`
	SkipPhases       []string                `json:"skipPhases,omitempty"`
}

// NodeRegistrationOptions says how the node registers with the cluster.
type NodeRegistrationOptions struct {
	Name                  string   `json:"name,omitempty"`
	CRISocket             string   `json:"criSocket,omitempty"`
	Taints                []Taint  `json:"taints,omitempty"`
	KubeletExtraArgs      []Arg    `json:"kubeletExtraArgs,omitempty"`
	IgnorePreflightErrors []string `json:"ignorePreflightErrors,omitempty"`
	ImagePullPolicy       string   `json:"imagePullPolicy,omitempty"`
}

// APIEndpoint is where this node's kube-apiserver advertises itself and listens.
type APIEndpoint struct {
	AdvertiseAddress string `json:"advertiseAddress,omitempty"`
	BindPort         int32  `json:"bindPort,omitempty"`
}

// ClusterConfiguration is the cluster-wide configuration, shared by every control-plane node.
type ClusterConfiguration struct {
	TypeMeta             `json:",inline"`
	ClusterName          string                 `json:"clusterName,omitempty"`
	KubernetesVersion    string                 `json:"kubernetesVersion,omitempty"`
	ControlPlaneEndpoint string                 `json:"controlPlaneEndpoint,omitempty"`
	ImageRepository      string                 `json:"imageRepository,omitempty"`
	Etcd                 Etcd                   `json:"etcd"`
	Networking           Networking             `json:"networking"`
	APIServer            APIServer              `json:"apiServer"`
	ControllerManager    *ControlPlaneComponent `json:"controllerManager,omitempty"`
	DNS                  *DNS                   `json:"dns,omitempty"`
	Proxy                *Proxy                 `json:"proxy,omitempty"`
}

// Etcd selects kubeadm's local (stacked) or external etcd; hactl always sets External.
type Etcd struct {
	External *ExternalEtcd `json:"external,omitempty"`
}

// ExternalEtcd is an etcd cluster kubeadm doesn't manage: its client URLs and the TLS files (on
// every control-plane node) the kube-apiserver uses to reach it.
type ExternalEtcd struct {
	Endpoints []string `json:"endpoints"`
	CAFile    string   `json:"caFile"`
	CertFile  string   `json:"certFile"`
	KeyFile   string   `json:"keyFile"`
}

// Networking holds the cluster's pod and service CIDRs.
type Networking struct {
	ServiceSubnet string `json:"serviceSubnet,omitempty"`
	PodSubnet     string `json:"podSubnet,omitempty"`
}

// APIServer configures kube-apiserver; CertSANs are extra subject alternative names of its
// serving certificate.
type APIServer struct {
	CertSANs []string `json:"certSANs,omitempty"`
}

// Arg is one extra command-line argument of a component (v1beta4 lists them as name/value pairs).
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// BootstrapToken is a bootstrap token `kubeadm init` or `kubeadm token create --config` creates.
type BootstrapToken struct {
	Token       string   `json:"token"`
	Description string   `json:"description,omitempty"`
	TTL         string   `json:"ttl,omitempty"`
	Usages      []string `json:"usages,omitempty"`
	Groups      []string `json:"groups,omitempty"`
}

// Taint is a node taint (core/v1 Taint's fields kubeadm reads).
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// JoinConfiguration holds what `kubeadm join` needs on the joining node.
type JoinConfiguration struct {
	TypeMeta         `json:",inline"`
	NodeRegistration NodeRegistrationOptions `json:"nodeRegistration"`
	Discovery        Discovery               `json:"discovery"`
	ControlPlane     *JoinControlPlane       `json:"controlPlane,omitempty"`
	SkipPhases       []string                `json:"skipPhases,omitempty"`
}

// Discovery says how a joining node finds and trusts the cluster.
type Discovery struct {
	BootstrapToken *BootstrapTokenDiscovery `json:"bootstrapToken,omitempty"`
}

// BootstrapTokenDiscovery trusts the cluster CA whose public key hashes to one of CACertHashes.
type BootstrapTokenDiscovery struct {
	Token             string   `json:"token"`
	APIServerEndpoint string   `json:"apiServerEndpoint"`
	CACertHashes      []string `json:"caCertHashes"`
}

// JoinControlPlane makes the joining node a control-plane node.
type JoinControlPlane struct {
	LocalAPIEndpoint APIEndpoint `json:"localAPIEndpoint"`
	CertificateKey   string      `json:"certificateKey,omitempty"`
}

// ControlPlaneComponent is a control-plane component's extra arguments.
type ControlPlaneComponent struct {
	ExtraArgs []Arg `json:"extraArgs,omitempty"`
}

// DNS and Proxy switch kubeadm's CoreDNS and kube-proxy addons.
type DNS struct {
	Disabled bool `json:"disabled,omitempty"`
}

// Proxy is kubeadm's kube-proxy addon switch.
type Proxy struct {
	Disabled bool `json:"disabled,omitempty"`
}

// KubeProxyConfiguration is the subset of kubeproxy.config.k8s.io/v1alpha1 hactl sets.
type KubeProxyConfiguration struct {
	TypeMeta    `json:",inline"`
	Mode        string `json:"mode"`
	ClusterCIDR string `json:"clusterCIDR"`
}
