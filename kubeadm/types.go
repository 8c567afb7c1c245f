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
	NodeRegistration NodeRegistrationOptions `json:"nodeRegistration"`
	LocalAPIEndpoint APIEndpoint             `json:"localAPIEndpoint"`
}

// NodeRegistrationOptions says how the node registers with the cluster.
type NodeRegistrationOptions struct {
	Name                  string   `json:"name,omitempty"`
	CRISocket             string   `json:"criSocket,omitempty"`
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
	ClusterName          string     `json:"clusterName,omitempty"`
	KubernetesVersion    string     `json:"kubernetesVersion,omitempty"`
	ControlPlaneEndpoint string     `json:"controlPlaneEndpoint,omitempty"`
	Etcd                 Etcd       `json:"etcd"`
	Networking           Networking `json:"networking"`
	APIServer            APIServer  `json:"apiServer"`
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
