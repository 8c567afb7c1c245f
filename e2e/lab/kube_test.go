package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func kubeNodesOf(t *testing.T) []Host {
	t.Helper()
	hosts, err := labHosts(3)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []Host
	for _, h := range hosts {
		if h.KubeNode() {
			nodes = append(nodes, h)
		}
	}
	return nodes
}

func TestKubeBootUnit(t *testing.T) {
	nodes := kubeNodesOf(t)
	got := kubeBootCommands(nodes[1], nodes)
	want := []string{
		"ln -sf /dev/null /dev/kmsg",
		"mount -o remount,rw /proc/sys",
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
		"ip route replace 10.244.1.0/24 via 172.28.0.11",
		"ip route replace 10.244.3.0/24 via 172.28.0.13",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cp-b's boot commands =\n%q\nwant\n%q", got, want)
	}
	unit := kubeBootUnitText(nodes[1], nodes)
	for _, w := range []string{"Type=oneshot", "RemainAfterExit=yes", "Before=containerd.service kubelet.service",
		"WantedBy=multi-user.target", `ExecStart=/bin/sh -ec "ln -sf /dev/null /dev/kmsg; `} {
		if !strings.Contains(unit, w) {
			t.Errorf("boot unit lacks %q:\n%s", w, unit)
		}
	}
}

// The real sed edits containerd 1.6.20's own default configuration (captured from a lab host) into
// LAB.md's, and nothing else.
func TestContainerdEdits(t *testing.T) {
	sed, err := exec.LookPath("sed")
	if err != nil {
		t.Skip("no sed")
	}
	const pause = "registry.k8s.io/pause:3.10.2"
	args := []string{}
	for _, e := range containerdEdits(pause) {
		args = append(args, "-e", e)
	}
	in, err := os.ReadFile("testdata/containerd-1.6.20-default.toml")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sed, append(args, "testdata/containerd-1.6.20-default.toml")...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range containerdChecks(pause) {
		if !strings.Contains(string(out), c) {
			t.Errorf("edited config lacks %q", c)
		}
	}
	before, after := strings.Split(string(in), "\n"), strings.Split(string(out), "\n")
	if len(before) != len(after) {
		t.Fatalf("line count %d -> %d", len(before), len(after))
	}
	var changed []string
	for i := range before {
		if before[i] != after[i] {
			changed = append(changed, strings.TrimSpace(after[i]))
		}
	}
	want := []string{"restrict_oom_score_adj = true", `sandbox_image = "` + pause + `"`, `bin_dir = "/usr/lib/cni"`}
	if !reflect.DeepEqual(changed, want) { // SystemdCgroup is false already in 1.6's default
		t.Errorf("changed lines %q, want %q", changed, want)
	}
}

func TestKubeNodeScript(t *testing.T) {
	nodes := kubeNodesOf(t)
	s, err := kubeNodeScript(nodes[0], nodes, "registry.k8s.io/pause:3.10.2")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v: %s\n%s", err, out, s)
	}
	for _, w := range []string{
		"put /etc/systemd/system/kubelet.service kubelet.service <<'HACTL_LAB_EOF'\n[Unit]",
		"put /etc/systemd/system/kubelet.service.d/10-kubeadm.conf 10-kubeadm.conf",
		"ExecStart=/usr/local/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n",
		"put /etc/systemd/system/hactl-lab-kube.service hactl-lab-kube.service",
		"ip route replace 10.244.2.0/24 via 172.28.0.12; ip route replace 10.244.3.0/24 via 172.28.0.13",
		`"subnet": "10.244.1.0/24"`,
		"put /etc/cni/net.d/99-loopback.conf cni-loopback",
		"containerd config default | sed -e ",
		"systemctl enable containerd",
		"systemctl enable kubelet",
	} {
		if !strings.Contains(s, w) {
			t.Errorf("cp-a's script lacks %q", w)
		}
	}
	if strings.Contains(s, "10.244.1.0/24 via") {
		t.Error("cp-a routes its own pod subnet away")
	}
}

func TestCNIConfig(t *testing.T) {
	s, err := cniConfig("10.244.2.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPAM      struct {
				Type   string                `json:"type"`
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatal(err)
	}
	if c.CNIVersion != "1.0.0" || len(c.Plugins) != 2 || c.Plugins[0].Type != "bridge" || c.Plugins[0].Bridge != "cni0" ||
		!c.Plugins[0].IsGateway || c.Plugins[0].IPAM.Type != "host-local" || c.Plugins[0].IPAM.Ranges[0][0]["subnet"] != "10.244.2.0/24" ||
		c.Plugins[1].Type != "portmap" {
		t.Errorf("conflist:\n%s", s)
	}
	var lo map[string]string
	if err := json.Unmarshal([]byte(loopbackConfig), &lo); err != nil || lo["type"] != "loopback" {
		t.Errorf("loopback: %v %v", lo, err)
	}
}

func TestKubeletConfig(t *testing.T) {
	var k map[string]any
	if err := yaml.UnmarshalStrict([]byte(kubeletConfig), &k); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"cgroupDriver": "cgroupfs", "failSwapOn": false, "failCgroupV1": false}
	if !reflect.DeepEqual(k, want) {
		t.Errorf("kubelet config %v, want %v", k, want)
	}
}

func TestKubeImages(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := KubeImages(dir); err == nil || !strings.Contains(err.Error(), "build-kube-images.sh") {
		t.Errorf("missing tarball: %v", err)
	}
	base := filepath.Join(dir, "kube-images-"+KubernetesVersion)
	refs := "registry.k8s.io/kube-apiserver:" + KubernetesVersion + "\nregistry.k8s.io/pause:3.10.2\n"
	if err := os.WriteFile(base+".list", []byte(refs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".tar", []byte("tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	tarball, got, err := KubeImages(dir)
	if err != nil || tarball != base+".tar" || len(got) != 2 {
		t.Fatalf("KubeImages = %s %v %v", tarball, got, err)
	}
	if p, err := pauseImage(got); err != nil || p != "registry.k8s.io/pause:3.10.2" {
		t.Errorf("pauseImage = %s, %v", p, err)
	}
	if _, err := pauseImage(got[:1]); err == nil {
		t.Error("no pause image: want an error")
	}
}

func TestControlPlaneEndpoint(t *testing.T) {
	cfg := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  advertiseAddress: 172.28.0.11\n---\n" +
		"apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: 172.28.0.100:6443\n---\n" +
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: cgroupfs\n"
	if got, err := controlPlaneEndpoint([]byte(cfg)); err != nil || got != "172.28.0.100:6443" {
		t.Errorf("controlPlaneEndpoint = %q, %v", got, err)
	}
	if _, err := controlPlaneEndpoint([]byte("kind: InitConfiguration\n")); err == nil {
		t.Error("no ClusterConfiguration: want an error")
	}
}

func TestReadSpecHosts(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteSpecs(dir, "/repo/bin")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []specHosts{{Name: "lab3"}, {Name: "lab5"}} {
		got, err := readSpecHosts(paths[i])
		want.ControlPlane = []string{"cp-a", "cp-b", "cp-c"}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v", paths[i], got, err)
		}
	}
}

func TestReadyNodes(t *testing.T) {
	list := `{"items":[
	 {"metadata":{"name":"cp-a"},"status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}]}},
	 {"metadata":{"name":"cp-b"},"status":{"conditions":[{"type":"Ready","status":"False"}]}},
	 {"metadata":{"name":"cp-c"},"status":{}}]}`
	got, err := readyNodes([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"cp-a": true, "cp-b": false, "cp-c": false}; !reflect.DeepEqual(got, want) {
		t.Errorf("readyNodes = %v, want %v", got, want)
	}
}

func TestCACertHash(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	got, err := caCertHash(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	if want := "sha256:" + hex.EncodeToString(sum[:]); err != nil || got != want {
		t.Errorf("caCertHash = %q, %v; want %q", got, err, want)
	}
	if _, err := caCertHash([]byte("not pem")); err == nil {
		t.Error("garbage: want an error")
	}
}

func TestRedactAndLastLine(t *testing.T) {
	err := redact(&CommandError{Args: []string{"kubeadm", "join", "--token", "abc.def", "--certificate-key", "k3y"}, Err: os.ErrClosed}, "abc.def", "k3y")
	if strings.Contains(err.Error(), "abc.def") || strings.Contains(err.Error(), "k3y") || !strings.Contains(err.Error(), "<redacted>") {
		t.Errorf("redact: %v", err)
	}
	if got := lastLine("[upload-certs] Using certificate key:\nf00d\n\n"); got != "f00d" {
		t.Errorf("lastLine = %q", got)
	}
}
