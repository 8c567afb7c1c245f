package kubeadm

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/golden"
	"github.com/hactl/hactl/specload"
)

func load(t *testing.T, name string) *v1alpha1.Cluster {
	t.Helper()
	p := filepath.Join("testdata", name)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := specload.Decode(raw, p, "testdata")
	if err != nil {
		t.Fatalf("decode %s: %v", p, err)
	}
	return c
}

// goldenCases are rendered, compared with testdata/<name>.golden, and (TestKubeadmValidate) checked
// by the real kubeadm.
var goldenCases = []struct {
	name, spec string
	opts       Options
}{
	{"lab-defaults", "lab.yaml", Options{}},
	{"lab-e2e", "lab.yaml", Options{ImagePullPolicy: "Never", IgnorePreflightErrors: []string{"all"},
		PodSubnet: "10.200.0.0/16", ServiceSubnet: "10.201.0.0/16"}},
	{"lab-kubelet", "lab.yaml", Options{ImagePullPolicy: "Never", IgnorePreflightErrors: []string{"all"},
		KubeletConfig: []byte(labKubelet)}},
	{"colocated-ipv6", "colocated-ipv6.yaml", Options{KubernetesVersion: "v1.37.0", PodSubnet: "fd10::/56", ServiceSubnet: "fd20::/108",
		IgnorePreflightErrors: []string{"Swap", "SystemVerification"}, ImagePullPolicy: "IfNotPresent"}},
	{"external", "external.yaml", Options{}},
}

// labKubelet is the KubeletConfiguration the lab passes with --kubelet-config (cgroup v1 hosts
// with swap: LAB.md).
const labKubelet = `# the lab's kubelets
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
`

func TestConfigGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Config(load(t, tc.spec), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", tc.name+".golden"), got, "go test ./kubeadm -run TestConfigGolden -update")
		})
	}
}

// TestConfigContent decodes the rendered documents and checks the fields hactl owns against the
// spec, independently of the golden files.
func TestConfigContent(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, tc.spec)
			out, err := Config(c, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			docs := strings.Split(string(out), "\n---\n")
			want := 2
			if tc.opts.KubeletConfig != nil {
				want = 3
			}
			if len(docs) != want {
				t.Fatalf("got %d documents, want %d:\n%s", len(docs), want, out)
			}
			if want == 3 {
				var kc map[string]any
				if err := yaml.Unmarshal([]byte(docs[2]), &kc); err != nil || kc["kind"] != KubeletKind || kc["cgroupDriver"] != "cgroupfs" {
					t.Errorf("third document: %v, %v; want the KubeletConfiguration passed in", kc, err)
				}
			}
			var init InitConfiguration
			var cluster ClusterConfiguration
			if err := yaml.UnmarshalStrict([]byte(docs[0]), &init); err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict([]byte(docs[1]), &cluster); err != nil {
				t.Fatal(err)
			}
			if init.APIVersion != "kubeadm.k8s.io/v1beta4" || init.Kind != "InitConfiguration" ||
				cluster.APIVersion != "kubeadm.k8s.io/v1beta4" || cluster.Kind != "ClusterConfiguration" {
				t.Errorf("type meta: %+v %+v", init.TypeMeta, cluster.TypeMeta)
			}
			var cps []v1alpha1.Host
			for _, h := range c.Spec.Hosts {
				if h.HasRole(v1alpha1.RoleControlPlane) {
					cps = append(cps, h)
				}
			}
			lb := c.Spec.LoadBalancer
			if init.LocalAPIEndpoint.AdvertiseAddress != cps[0].Address || init.NodeRegistration.Name != cps[0].Name {
				t.Errorf("init endpoint %+v name %q; want the first control-plane host %s", init.LocalAPIEndpoint, init.NodeRegistration.Name, cps[0].Name)
			}
			wantPort := lb.APIServerPort
			if wantPort == 0 {
				wantPort = 6443
			}
			if int(init.LocalAPIEndpoint.BindPort) != wantPort {
				t.Errorf("bindPort %d, want %d", init.LocalAPIEndpoint.BindPort, wantPort)
			}
			if init.NodeRegistration.CRISocket != "unix:///run/containerd/containerd.sock" {
				t.Errorf("criSocket %q", init.NodeRegistration.CRISocket)
			}
			members, err := etcd.MembersFromSpec(c)
			if err != nil {
				t.Fatal(err)
			}
			ext := cluster.Etcd.External
			if ext == nil || !slices.Equal(ext.Endpoints, etcd.ClientURLs(members)) {
				t.Fatalf("etcd.external %+v; want endpoints %v", ext, etcd.ClientURLs(members))
			}
			if ext.CAFile != "/etc/kubernetes/pki/etcd/ca.crt" || ext.CertFile != "/etc/kubernetes/pki/apiserver-etcd-client.crt" ||
				ext.KeyFile != "/etc/kubernetes/pki/apiserver-etcd-client.key" {
				t.Errorf("etcd.external files %+v", ext)
			}
			vip, _, _ := strings.Cut(lb.VIP, "/")
			if lb.External != nil {
				vip = lb.External.Address // the endpoint's host: external's address
			}
			for _, want := range append([]string{vip}, hostAddrs(cps)...) {
				if !slices.Contains(cluster.APIServer.CertSANs, want) {
					t.Errorf("certSANs %v lack %s", cluster.APIServer.CertSANs, want)
				}
			}
			if !strings.Contains(cluster.ControlPlaneEndpoint, vip) || strings.Contains(cluster.ControlPlaneEndpoint, "/") {
				t.Errorf("controlPlaneEndpoint %q: want the VIP (or external's address) %s without its prefix", cluster.ControlPlaneEndpoint, vip)
			}
		})
	}
}

func hostAddrs(hs []v1alpha1.Host) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Address)
	}
	return out
}

func TestControlPlaneEndpoint(t *testing.T) {
	lab := load(t, "lab.yaml")
	v6 := load(t, "colocated-ipv6.yaml")
	for _, tc := range []struct {
		c    *v1alpha1.Cluster
		want string
	}{
		{lab, "controlPlaneEndpoint: 172.28.0.100:6443\n"},
		{v6, "controlPlaneEndpoint: '[fd00:10::100]:8443'\n"},
		{load(t, "external.yaml"), "controlPlaneEndpoint: api.lab.example.com:8443\n"},
	} {
		out, err := Config(tc.c, Options{PodSubnet: "fd10::/56", ServiceSubnet: "fd20::/108"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("output lacks %q:\n%s", tc.want, out)
		}
	}
}

// TestSpecErrors: what the spec lacks is a *v1alpha1.ValidationError (exit 2) naming the field.
func TestSpecErrors(t *testing.T) {
	noCP := load(t, "lab.yaml")
	for i := range noCP.Spec.Hosts {
		noCP.Spec.Hosts[i].Roles = slices.DeleteFunc(noCP.Spec.Hosts[i].Roles, func(r v1alpha1.Role) bool { return r == v1alpha1.RoleControlPlane })
	}
	badVIP := load(t, "lab.yaml")
	badVIP.Spec.LoadBalancer.VIP = "172.28.0.100"
	for _, tc := range []struct {
		name string
		c    *v1alpha1.Cluster
		want []string
	}{
		{"no load balancer", load(t, "no-lb.yaml"), []string{"cluster.yaml:6: spec.loadBalancer: Required value", "VIP"}},
		{"no control-plane host", noCP, []string{"spec.hosts: Required value: no host has role control-plane"}},
		{"VIP without prefix", badVIP, []string{`spec.loadBalancer.vip: Invalid value: "172.28.0.100"`, "prefix length"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Config(tc.c, Options{Source: "cluster.yaml"})
			var ve *v1alpha1.ValidationError
			if !errors.As(err, &ve) || ve.ExitCode() != 2 || out != nil {
				t.Fatalf("Config = %q, %v (%T); want a *v1alpha1.ValidationError", out, err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestOptionErrors: bad options are *OptionError (exit 2) naming the flag.
func TestOptionErrors(t *testing.T) {
	lab := load(t, "lab.yaml")
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{KubernetesVersion: "1.37.2"}, `--kubernetes-version: "1.37.2" is not a Kubernetes release version`},
		{Options{ImagePullPolicy: "never"}, `--image-pull-policy: "never": must be Always, IfNotPresent or Never`},
		{Options{PodSubnet: "10.244.0.0"}, `--pod-subnet: "10.244.0.0" is not a CIDR`},
		{Options{ServiceSubnet: "10.96.1.0/12"}, `--service-subnet: "10.96.1.0/12" has host bits set; did you mean 10.96.0.0/12?`},
		{Options{PodSubnet: "10.96.0.0/16"}, "--pod-subnet: 10.96.0.0/16 overlaps the service subnet 10.96.0.0/12"},
		{Options{PodSubnet: "172.28.0.0/16"}, "--pod-subnet: 172.28.0.0/16 contains the load balancer VIP 172.28.0.100"},
		{Options{ServiceSubnet: "172.28.0.0/28"}, "--service-subnet: 172.28.0.0/28 contains host cp-a's address 172.28.0.11"},
		{Options{KubeletConfig: []byte("")}, "--kubelet-config: is empty"},
		{Options{KubeletConfig: []byte("kind: KubeletConfiguration\n")}, "--kubelet-config: has apiVersion <nil>, kind KubeletConfiguration: want apiVersion kubelet.config.k8s.io/v1beta1"},
		{Options{KubeletConfig: []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n")}, "want apiVersion kubelet.config.k8s.io/v1beta1, kind KubeletConfiguration"},
		{Options{KubeletConfig: []byte(labKubelet + "---\napiVersion: v1\nkind: ConfigMap\n")}, "--kubelet-config: holds more than one YAML document"},
		{Options{KubeletConfig: []byte("a: [b\n")}, "--kubelet-config: not YAML"},
	} {
		_, err := Config(lab, tc.opts)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.ExitCode() != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v (%T); want an *OptionError saying %q", tc.opts, err, err, tc.want)
		}
	}
}

// TestDefaultVersionIsPinned: DefaultKubernetesVersion is the version tools/kubernetes builds.
func TestDefaultVersionIsPinned(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "tools", "kubernetes", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes (v\S+)`).FindSubmatch(raw)
	if m == nil || string(m[1]) != DefaultKubernetesVersion {
		t.Fatalf("tools/kubernetes/go.mod pins k8s.io/kubernetes %q; DefaultKubernetesVersion is %s", m, DefaultKubernetesVersion)
	}
}

// kubeadmBinary returns the real kubeadm to validate with: $HACTL_KUBEADM, else bin/kubeadm (built
// by hack/build-kubernetes.sh). Missing: the test is skipped, or fails when HACTL_REQUIRE_KUBEADM=1
// (CI sets it so the check can't silently disappear).
func kubeadmBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HACTL_KUBEADM")
	if p == "" {
		p = filepath.Join("..", "bin", "kubeadm")
	}
	abs, err := filepath.Abs(p)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		msg := "real kubeadm not available (" + err.Error() + "); build it with hack/build-kubernetes.sh"
		if os.Getenv("HACTL_REQUIRE_KUBEADM") == "1" {
			t.Fatal(msg + " (HACTL_REQUIRE_KUBEADM=1)")
		}
		t.Skip(msg)
	}
	return abs
}

// TestKubeadmValidate runs the real `kubeadm config validate` (strict: unknown fields and invalid
// values are errors) on every golden case, and on a broken config to prove the check can fail.
func TestKubeadmValidate(t *testing.T) {
	kubeadm := kubeadmBinary(t)
	validate := func(t *testing.T, cfg []byte) (string, error) {
		p := filepath.Join(t.TempDir(), "kubeadm.yaml")
		if err := os.WriteFile(p, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(t.Context(), kubeadm, "config", "validate", "--config", p).CombinedOutput()
		return string(out), err
	}
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Config(load(t, tc.spec), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			out, err := validate(t, cfg)
			t.Logf("kubeadm config validate (%s): %s", tc.name, strings.TrimSpace(out))
			if err != nil || strings.TrimSpace(lastLine(out)) != "ok" {
				t.Fatalf("kubeadm config validate: %v\n%s\nconfig:\n%s", err, out, cfg)
			}
		})
	}
	t.Run("broken config is rejected", func(t *testing.T) {
		cfg, err := Config(load(t, "lab.yaml"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		broken := bytes.Replace(cfg, []byte("caFile: /etc/kubernetes/pki/etcd/ca.crt"), []byte("caFile: relative/ca.crt\n    caFiel: x"), 1)
		if bytes.Equal(broken, cfg) {
			t.Fatal("test setup: caFile line not found")
		}
		out, err := validate(t, broken)
		t.Logf("kubeadm config validate (broken): %s", strings.TrimSpace(out))
		if err == nil {
			t.Fatalf("kubeadm accepted a config with an unknown field and a relative caFile:\n%s", out)
		}
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
