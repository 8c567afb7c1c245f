package kubenode

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

func TestContainerdConfig(t *testing.T) {
	c := Containerd{Version: "1.6.20~ds1", SystemdCgroup: false, SandboxImage: "registry.k8s.io/pause:3.10.2", RestrictOOMScoreAdj: true, CNIBinDir: "/usr/lib/cni"}
	v2 := string(ContainerdConfig(c))
	for _, want := range []string{"version = 2", `[plugins."io.containerd.grpc.v1.cri"]`, `sandbox_image = "registry.k8s.io/pause:3.10.2"`,
		"restrict_oom_score_adj = true", "SystemdCgroup = false", `bin_dir = "/usr/lib/cni"`, `conf_dir = "/etc/cni/net.d"`} {
		if !strings.Contains(v2, want) {
			t.Errorf("containerd 1.x config lacks %q:\n%s", want, v2)
		}
	}
	c.Version, c.SystemdCgroup, c.RestrictOOMScoreAdj = "v2.1.4", true, false
	v3 := string(ContainerdConfig(c))
	for _, want := range []string{"version = 3", `[plugins."io.containerd.cri.v1.images".pinned_images]`, `sandbox = "registry.k8s.io/pause:3.10.2"`,
		"restrict_oom_score_adj = false", "SystemdCgroup = true", `bin_dirs = ["/usr/lib/cni"]`} {
		if !strings.Contains(v3, want) {
			t.Errorf("containerd 2.x config lacks %q:\n%s", want, v3)
		}
	}
	if string(ContainerdConfig(c)) != v3 {
		t.Error("the same inputs rendered two different files")
	}
	for v, want := range map[string]int{"garbage": 0, "": 0, "1.7.24": 1, "1.6.20~ds1": 1, "v2.0.0": 2, "2.1.4": 2} {
		if got := (Containerd{Version: v}).Major(); got != want {
			t.Errorf("Containerd{Version: %q}.Major() = %d, want %d", v, got, want)
		}
	}
}

func TestPackages(t *testing.T) {
	missing := []string{"containerd", "runc", "cni", "conntrack", "modprobe", "socat"}
	if got := Packages("apt-get", missing); !slices.Equal(got, []string{"containerd", "runc", "containernetworking-plugins", "conntrack", "kmod", "socat"}) {
		t.Errorf("apt-get: %v", got)
	}
	for _, pm := range []string{"dnf", "yum"} {
		if got := Packages(pm, missing); !slices.Equal(got, []string{"containerd", "runc", "containernetworking-plugins", "conntrack-tools", "kmod", "socat"}) {
			t.Errorf("%s: %v", pm, got)
		}
	}
	if got := Packages("apt-get", []string{"ctr", "unknown"}); len(got) != 0 {
		t.Errorf("commands without a package of their own: %v", got)
	}
}

func TestBridgeConfigRoundTrip(t *testing.T) {
	p := netip.MustParsePrefix("10.244.3.0/24")
	conf := BridgeConfig(p)
	if got, ok := BridgeRange(conf); !ok || got != p {
		t.Errorf("BridgeRange(BridgeConfig(%s)) = %s, %v", p, got, ok)
	}
	if !strings.Contains(string(conf), `"dst": "0.0.0.0/0"`) || !strings.Contains(string(conf), `"type": "portmap"`) {
		t.Errorf("bridge config:\n%s", conf)
	}
	if v6 := BridgeConfig(netip.MustParsePrefix("fd10::/64")); !strings.Contains(string(v6), `"dst": "::/0"`) {
		t.Errorf("IPv6 bridge config:\n%s", v6)
	}
	for _, bad := range []string{"", "{}", `{"plugins":[{"type":"calico"}]}`} {
		if _, ok := BridgeRange([]byte(bad)); ok {
			t.Errorf("BridgeRange(%q) ok", bad)
		}
	}
}

func TestRoutesUnitText(t *testing.T) {
	a := Route{PodCIDR: netip.MustParsePrefix("10.244.2.0/24"), Via: netip.MustParseAddr("172.28.0.12")}
	b := Route{PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), Via: netip.MustParseAddr("172.28.0.11")}
	u1, u2 := string(RoutesUnitText([]Route{a, b})), string(RoutesUnitText([]Route{b, a}))
	if u1 != u2 {
		t.Error("the unit depends on the order of the routes")
	}
	if i, j := strings.Index(u1, "10.244.1.0/24 via 172.28.0.11"), strings.Index(u1, "10.244.2.0/24 via 172.28.0.12"); i < 0 || j < i {
		t.Errorf("routes unit:\n%s", u1)
	}
	if !strings.Contains(string(RoutesUnitText(nil)), "ExecStart=/bin/true") {
		t.Error("a node alone needs a unit that still starts")
	}
}

func TestClusterStateProblems(t *testing.T) {
	nodes := `{"items":[
 {"metadata":{"name":"cp-a","labels":{"topology.kubernetes.io/zone":"az-a"}},"spec":{"podCIDR":"10.244.0.0/24"},"status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.37.2"}}},
 {"metadata":{"name":"w-a","labels":{}},"status":{"conditions":[{"type":"Ready","status":"False"}]}}]}`
	pods := `{"items":[
 {"metadata":{"name":"kube-apiserver-cp-a","labels":{"tier":"control-plane"}},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}},
 {"metadata":{"name":"kube-scheduler-cp-a","labels":{"tier":"control-plane"}},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False"}]}},
 {"metadata":{"name":"kube-proxy-x","labels":{"k8s-app":"kube-proxy"}},"spec":{"nodeName":"cp-a"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}},
 {"metadata":{"name":"coredns-1","labels":{"k8s-app":"kube-dns"}},"status":{"phase":"Pending"}}]}`
	st, err := ParseClusterState([]byte(nodes + "\n---\n" + pods))
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Nodes["cp-a"]; !n.Ready || n.Zone != "az-a" || n.KubeletVersion != "v1.37.2" || n.PodCIDR != "10.244.0.0/24" {
		t.Errorf("cp-a: %+v", n)
	}
	c := &v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{Kubernetes: &v1alpha1.Kubernetes{CNI: v1alpha1.CNIBridge}, Hosts: []v1alpha1.Host{
		{Name: "cp-a", Roles: []v1alpha1.Role{v1alpha1.RoleControlPlane}},
		{Name: "w-a", Roles: []v1alpha1.Role{v1alpha1.RoleWorker}},
		{Name: "w-b", Roles: []v1alpha1.Role{v1alpha1.RoleWorker}},
	}}}
	want := []string{"CoreDNS 0/1 Ready", "kube-controller-manager-cp-a missing", "kube-scheduler-cp-a not Ready",
		"no kube-proxy pod on w-a", "no kube-proxy pod on w-b", "w-a NotReady", "w-b not registered"}
	if got := st.Problems(c); !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	c.Spec.Kubernetes.CNI = v1alpha1.CNINone // nodes wait for the user's CNI: registered is enough
	if got := st.Problems(c); !slices.Equal(got, []string{"kube-controller-manager-cp-a missing", "kube-scheduler-cp-a not Ready", "w-b not registered"}) {
		t.Errorf("problems with cni none: %q", got)
	}
	if _, err := ParseClusterState([]byte("{}")); err == nil {
		t.Error("output without the separator accepted")
	}
}
