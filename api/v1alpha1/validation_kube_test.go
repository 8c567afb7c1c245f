package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

// kubeCluster returns a valid defaulted spec with etcd + control plane on a, b, c, two LB hosts,
// three workers and spec.kubernetes from local binaries.
func kubeCluster(mutate func(c *Cluster)) *Cluster {
	c := &Cluster{
		APIVersion: APIVersion, Kind: Kind,
		Metadata: ObjectMeta{Name: "lab"},
		Spec: ClusterSpec{
			SSH: SSH{IdentityFile: "id", KnownHostsFile: "ssh/known_hosts"},
			Hosts: []Host{
				{Name: "a", Address: "10.0.0.1", Zone: "az-a", Roles: []Role{RoleEtcd, RoleControlPlane}},
				{Name: "b", Address: "10.0.0.2", Zone: "az-b", Roles: []Role{RoleEtcd, RoleControlPlane}},
				{Name: "c", Address: "10.0.0.3", Zone: "az-c", Roles: []Role{RoleEtcd, RoleControlPlane}},
				{Name: "lb-a", Address: "10.0.0.21", Zone: "az-a", Roles: []Role{RoleLB}},
				{Name: "lb-b", Address: "10.0.0.22", Zone: "az-b", Roles: []Role{RoleLB}},
				{Name: "w-a", Address: "10.0.0.31", Zone: "az-a", Roles: []Role{RoleWorker}},
				{Name: "w-b", Address: "10.0.0.32", Zone: "az-b", Roles: []Role{RoleWorker}},
				{Name: "w-c", Address: "10.0.0.33", Zone: "az-c", Roles: []Role{RoleWorker}},
			},
			Etcd:         Etcd{Version: "v3.6.16", Binaries: EtcdBinaries{Etcd: "etcd"}},
			LoadBalancer: &LoadBalancer{VIP: "10.0.0.100/24"},
			Kubernetes: &Kubernetes{Version: "v1.37.2",
				Binaries: KubeBinaries{Kubelet: "kubelet", Kubeadm: "kubeadm", Kubectl: "kubectl"}},
		},
	}
	if mutate != nil {
		mutate(c)
	}
	SetDefaults(c, Dirs{Base: "/specs"})
	return c
}

func TestKubernetesDefaults(t *testing.T) {
	k := kubeCluster(nil).Spec.Kubernetes
	if k.KubeletVersion != "v1.37.2" || k.ImageRepository != "registry.k8s.io" || k.PodSubnet != "10.244.0.0/16" ||
		k.ServiceSubnet != "10.96.0.0/12" || k.NodeCIDRMaskSize != 24 || k.CNI != CNIBridge || k.NodeSubnet != "10.0.0.0/24" ||
		k.Binaries.Kubelet != "/specs/kubelet" || !k.CoreDNSEnabled() {
		t.Errorf("defaults: %+v", k)
	}
	want := []string{"registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/kube-controller-manager:v1.37.2",
		"registry.k8s.io/kube-scheduler:v1.37.2", "registry.k8s.io/kube-proxy:v1.37.2", "registry.k8s.io/pause:3.10.2",
		"registry.k8s.io/coredns/coredns:v1.14.6"}
	if got := k.KubeImages(); !slices.Equal(got, want) {
		t.Errorf("images %v, want %v (kubeadm config images list --kubernetes-version v1.37.2, without etcd)", got, want)
	}
	off := false
	k.CoreDNS, k.ImageRepository = &off, "registry.example.com:5000/k8s"
	if got := k.KubeImages(); len(got) != 5 || got[4] != "registry.example.com:5000/k8s/pause:3.10.2" {
		t.Errorf("images without CoreDNS from a mirror: %v", got)
	}
	k.CoreDNS = nil
	if got := k.KubeImages(); got[5] != "registry.example.com:5000/k8s/coredns:v1.14.6" {
		t.Errorf("CoreDNS from a mirror %v, want <repo>/coredns (kubeadm's rule)", got)
	}
	if got := k.PauseImage(); got != "registry.example.com:5000/k8s/pause:3.10.2" {
		t.Errorf("pause %q", got)
	}
}

func TestValidateKubernetes(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	tests := []struct {
		name   string
		mutate func(c *Cluster)
		want   []string
		msg    string // in the first error
	}{
		{"valid", func(c *Cluster) {}, nil, ""},
		{"a preflight check twice, in another case", func(c *Cluster) { c.Spec.Kubernetes.IgnorePreflightErrors = []string{"Swap", "swap"} },
			[]string{"spec.kubernetes.ignorePreflightErrors[1]"}, "already listed at spec.kubernetes.ignorePreflightErrors[0]"},
		{"download instead of binaries", func(c *Cluster) {
			c.Spec.Kubernetes.Binaries.Kubelet = ""
			c.Spec.Kubernetes.Download.Kubelet = &Download{URL: "http://mirror:8080/kubelet", SHA256: strings.ToUpper(sha)}
		}, nil, ""},
		{"kubelet newer than the control plane", func(c *Cluster) { c.Spec.Kubernetes.KubeletVersion = "v1.38.0" },
			[]string{"spec.kubernetes.kubeletVersion"}, "must not be newer"},
		{"kubelet newer patch", func(c *Cluster) { c.Spec.Kubernetes.KubeletVersion = "v1.37.3" },
			[]string{"spec.kubernetes.kubeletVersion"}, "must not be newer"},
		{"kubelet three minors older", func(c *Cluster) { c.Spec.Kubernetes.KubeletVersion = "v1.34.9" }, nil, ""},
		{"kubelet four minors older", func(c *Cluster) { c.Spec.Kubernetes.KubeletVersion = "v1.33.4" },
			[]string{"spec.kubernetes.kubeletVersion"}, "at most 3 minor versions older"},
		{"unsupported version", func(c *Cluster) { c.Spec.Kubernetes.Version = "v1.30.0" },
			[]string{"spec.kubernetes.version"}, "knows the images"},
		{"no version", func(c *Cluster) { c.Spec.Kubernetes.Version = "" },
			[]string{"spec.kubernetes.version"}, "set the Kubernetes release"},
		{"release kubelet on a pre-release control plane", func(c *Cluster) {
			c.Spec.Kubernetes.Version, c.Spec.Kubernetes.KubeletVersion = "v1.37.0-rc.1", "v1.37.0"
		}, []string{"spec.kubernetes.kubeletVersion"}, "must not be newer"},
		{"pre-release kubelet on a release control plane", func(c *Cluster) {
			c.Spec.Kubernetes.Version, c.Spec.Kubernetes.KubeletVersion = "v1.37.2", "v1.37.2-rc.0"
		}, nil, ""},
		{"leading zeros", func(c *Cluster) { c.Spec.Kubernetes.Version = "v1.37.02" }, []string{"spec.kubernetes.version"}, "release version"},
		{"another major", func(c *Cluster) { c.Spec.Kubernetes.Version, c.Spec.Kubernetes.KubeletVersion = "v1.37.2", "v0.37.2" },
			[]string{"spec.kubernetes.kubeletVersion"}, "major version"},
		{"IPv6 pods on IPv4 nodes", func(c *Cluster) {
			c.Spec.Kubernetes.PodSubnet, c.Spec.Kubernetes.ServiceSubnet = "fd00:10::/56", "fd00:20::/108"
		}, []string{"spec.kubernetes.podSubnet"}, "single-stack"},
		{"service subnet too small", func(c *Cluster) { c.Spec.Kubernetes.ServiceSubnet = "10.96.0.0/29" },
			[]string{"spec.kubernetes.serviceSubnet"}, "too few"},
		{"service subnet of 8 without CoreDNS", func(c *Cluster) {
			off := false
			c.Spec.Kubernetes.CoreDNS, c.Spec.Kubernetes.ServiceSubnet = &off, "10.96.0.0/29"
		}, nil, ""},
		{"frontend port on kubelet's, LB on the control planes", func(c *Cluster) {
			c.Spec.LoadBalancer.Topology, c.Spec.LoadBalancer.FrontendPort = TopologyColocated, 10250
			c.Spec.Hosts = append(c.Spec.Hosts[:3], c.Spec.Hosts[5:]...)
		}, []string{"spec.loadBalancer.frontendPort"}, "kubelet's port"},
		{"apiserver port in the NodePort range", func(c *Cluster) { c.Spec.LoadBalancer.APIServerPort = 30443 },
			[]string{"spec.loadBalancer.apiServerPort"}, "NodePort range"},
		{"download URL with a query string", func(c *Cluster) {
			c.Spec.Kubernetes.Binaries.Kubelet = ""
			c.Spec.Kubernetes.Download.Kubelet = &Download{URL: "https://dl.example.com/kubelet?token=s3cret", SHA256: strings.Repeat("ab", 32)}
		}, []string{"spec.kubernetes.download.kubelet.url"}, "query string"},
		{"artifact missing", func(c *Cluster) { c.Spec.Kubernetes.Binaries.Kubectl = "" },
			[]string{"spec.kubernetes.binaries.kubectl"}, "spec.kubernetes.download.kubectl"},
		{"artifact twice", func(c *Cluster) {
			c.Spec.Kubernetes.Download.Kubeadm = &Download{URL: "https://dl.k8s.io/kubeadm", SHA256: sha}
		}, []string{"spec.kubernetes.download.kubeadm"}, "not both"},
		{"download without sha256", func(c *Cluster) {
			c.Spec.Kubernetes.Binaries.Kubelet = ""
			c.Spec.Kubernetes.Download.Kubelet = &Download{URL: "https://dl.k8s.io/kubelet"}
		}, []string{"spec.kubernetes.download.kubelet.sha256"}, "never installs a download it can't verify"},
		{"pod subnet overlaps service subnet", func(c *Cluster) { c.Spec.Kubernetes.ServiceSubnet = "10.244.128.0/20" },
			[]string{"spec.kubernetes.podSubnet"}, "overlaps serviceSubnet"},
		{"pod subnet holds a host", func(c *Cluster) { c.Spec.Kubernetes.PodSubnet = "10.0.0.0/16" },
			[]string{"spec.kubernetes.podSubnet"}, "contains the load balancer VIP"},
		{"service subnet holds a host outside nodeSubnet", func(c *Cluster) {
			c.Spec.Kubernetes.CNI = CNINone
			c.Spec.Kubernetes.NodeSubnet = "10.0.0.0/25"
			c.Spec.Hosts[5].Address = "10.1.0.31"
			c.Spec.Kubernetes.ServiceSubnet = "10.1.0.0/16"
		}, []string{"spec.kubernetes.serviceSubnet"}, "contains host w-a's address"},
		{"pod subnet too small", func(c *Cluster) { c.Spec.Kubernetes.PodSubnet = "10.244.0.0/22" },
			[]string{"spec.kubernetes.podSubnet"}, "4 node ranges of /24, too few for the 6"},
		{"node mask too long", func(c *Cluster) { c.Spec.Kubernetes.PodSubnet = "100.0.0.0/8"; c.Spec.Kubernetes.NodeCIDRMaskSize = 25 },
			[]string{"spec.kubernetes.nodeCIDRMaskSize"}, "at most 16 bits longer"},
		{"host bits", func(c *Cluster) { c.Spec.Kubernetes.PodSubnet = "10.244.1.0/16" },
			[]string{"spec.kubernetes.podSubnet"}, "did you mean 10.244.0.0/16"},
		{"service subnet too big", func(c *Cluster) { c.Spec.Kubernetes.ServiceSubnet = "10.96.0.0/11" },
			[]string{"spec.kubernetes.serviceSubnet"}, "at most 20"},
		{"worker without control plane", func(c *Cluster) {
			for i := range c.Spec.Hosts[:3] {
				c.Spec.Hosts[i].Roles = []Role{RoleEtcd}
			}
		}, []string{"spec.hosts", "spec.hosts"}, "workers join a control plane"},
		{"worker without spec.kubernetes", func(c *Cluster) { c.Spec.Kubernetes = nil }, []string{"spec.hosts[5].roles", "spec.hosts[6].roles", "spec.hosts[7].roles"}, "add spec.kubernetes"},
		{"worker and control plane", func(c *Cluster) { c.Spec.Hosts[0].Roles = append(c.Spec.Hosts[0].Roles, RoleWorker) },
			[]string{"spec.hosts[0].roles"}, "not both"},
		{"bridge across subnets", func(c *Cluster) { c.Spec.Hosts[6].Address = "10.0.1.32" },
			[]string{"spec.hosts[6].address"}, "one L2 segment"},
		{"bridge across subnets is fine with cni none", func(c *Cluster) {
			c.Spec.Hosts[6].Address = "10.0.1.32"
			c.Spec.Kubernetes.CNI = CNINone
		}, nil, ""},
		{"several control planes without a load balancer", func(c *Cluster) {
			c.Spec.LoadBalancer = nil
			c.Spec.Hosts = c.Spec.Hosts[:3]
			c.Spec.Kubernetes.NodeSubnet = "10.0.0.0/24"
		}, []string{"spec.loadBalancer"}, "need a load balancer"},
		{"one control plane, no load balancer, bridge without nodeSubnet", func(c *Cluster) {
			c.Spec.LoadBalancer = nil
			c.Spec.Hosts = []Host{c.Spec.Hosts[0], c.Spec.Hosts[5]}
			c.Spec.Hosts[0].Roles = []Role{RoleEtcd, RoleControlPlane}
		}, []string{"spec.kubernetes.nodeSubnet"}, "set nodeSubnet"},
		{"unknown cni and driver", func(c *Cluster) { c.Spec.Kubernetes.CNI = "flannel"; c.Spec.Kubernetes.Runtime.CgroupDriver = "cgroup" },
			[]string{"spec.kubernetes.runtime.cgroupDriver", "spec.kubernetes.cni"}, "Unsupported value"},
		{"image repository with scheme", func(c *Cluster) { c.Spec.Kubernetes.ImageRepository = "https://registry.example.com" },
			[]string{"spec.kubernetes.imageRepository"}, "without scheme"},
		{"zone is not a label value", func(c *Cluster) { c.Spec.Hosts[5].Zone = "az-a-" },
			[]string{"spec.hosts[5].zone", "spec.hosts[5].zone"}, ""},
		{"duplicate archive", func(c *Cluster) { c.Spec.Kubernetes.ImageArchives = []string{"a.tar", "a.tar"} },
			[]string{"spec.kubernetes.imageArchives[1]"}, "already listed"},
		{"preflight names", func(c *Cluster) { c.Spec.Kubernetes.IgnorePreflightErrors = []string{"Swap,SystemVerification"} },
			[]string{"spec.kubernetes.ignorePreflightErrors[0]"}, "one kubeadm preflight check name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kubeCluster(tt.mutate)
			errs, _ := Validate(c, nil)
			got := fields(errs)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("errors at %v, want %v:\n%v", got, tt.want, errs.ToAggregate())
			}
			if tt.msg != "" && !strings.Contains(errs.ToAggregate().Error(), tt.msg) {
				t.Errorf("messages %q lack %q", errs.ToAggregate().Error(), tt.msg)
			}
		})
	}
}
