package kubeadm

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var testSecrets = Secrets{Token: "abcdef.0123456789abcdef", CertificateKey: strings.Repeat("0f", 32)}

func TestNewSecrets(t *testing.T) {
	s, err := NewSecrets()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(s.Token) || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(s.CertificateKey) {
		t.Errorf("secrets of the wrong shape: token %d chars, key %d chars", len(s.Token), len(s.CertificateKey))
	}
	if s2, _ := NewSecrets(); s2 == s {
		t.Error("two calls gave the same secrets")
	}
	if got := s.Redact("join --token " + s.Token + " key " + s.CertificateKey); strings.Contains(got, s.Token) || strings.Contains(got, s.CertificateKey) {
		t.Errorf("Redact left a secret: %s", got)
	}
}

// TestNodeConfigs: the init and join configurations carry the node's registration (name, node IP,
// zone and region labels), the secrets, the cgroup driver for kubelet, kube-proxy in iptables mode,
// and pass the real `kubeadm config validate`.
func TestNodeConfigs(t *testing.T) {
	c := load(t, "kube.yaml")
	p := NodeParams{CgroupDriver: "cgroupfs", CgroupV1: true, ImagePullPolicy: "Never", Kubelet: map[string]any{"failSwapOn": false, "maxPods": 50}}
	init, err := InitConfig(c, "cp-a", p, testSecrets)
	if err != nil {
		t.Fatal(err)
	}
	s := string(init)
	for _, want := range []string{
		"token: " + testSecrets.Token, "certificateKey: " + testSecrets.CertificateKey, "name: cp-a",
		"value: topology.kubernetes.io/zone=az-a,topology.kubernetes.io/region=lab", "value: 172.28.0.11",
		"controlPlaneEndpoint: 172.28.0.100:6443", "cgroupDriver: cgroupfs", "failCgroupV1: false", "failSwapOn: false",
		"maxPods: 50", "mode: iptables", "clusterCIDR: 10.244.0.0/16", "imagePullPolicy: Never", "disabled: true",
		"name: node-cidr-mask-size", "- Swap",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("init config lacks %q:\n%s", want, s)
		}
	}
	if _, err := InitConfig(c, "w-a", p, testSecrets); err == nil {
		t.Error("InitConfig on a worker: no error")
	}
	joinCP, err := JoinConfig(c, "cp-b", p, testSecrets, "sha256:"+strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	joinW, err := JoinConfig(c, "w-b", p, testSecrets, "sha256:"+strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(joinCP), "certificateKey: "+testSecrets.CertificateKey) || !strings.Contains(string(joinCP), "advertiseAddress: 172.28.0.12") {
		t.Errorf("control-plane join lacks its controlPlane section:\n%s", joinCP)
	}
	if strings.Contains(string(joinW), "certificateKey") || strings.Contains(string(joinW), "controlPlane") {
		t.Errorf("worker join has a controlPlane section:\n%s", joinW)
	}
	var j JoinConfiguration
	if err := yaml.UnmarshalStrict(joinW, &j); err != nil || j.Discovery.BootstrapToken.APIServerEndpoint != "172.28.0.100:6443" ||
		j.NodeRegistration.KubeletExtraArgs[1].Value != "topology.kubernetes.io/zone=az-b,topology.kubernetes.io/region=lab" {
		t.Errorf("worker join %+v %v", j, err)
	}

	kubeadm := kubeadmBinary(t)
	for name, cfg := range map[string][]byte{"init": init, "join-control-plane": joinCP, "join-worker": joinW} {
		path := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(t.Context(), kubeadm, "config", "validate", "--config", path).CombinedOutput()
		if err != nil || lastLine(string(out)) != "ok" {
			t.Errorf("kubeadm config validate (%s): %v\n%s\n%s", name, err, out, cfg)
		}
	}
}

// TestNodeConfigsPrivateAddress: with hosts[*].privateAddress, kubelet's node-ip is that address,
// the apiserver keeps advertising address, and the apiserver certificate carries both.
func TestNodeConfigsPrivateAddress(t *testing.T) {
	c := load(t, "kube.yaml")
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		switch h.Name {
		case "cp-a":
			h.PrivateAddress = "192.168.10.11"
		case "w-b":
			h.PrivateAddress = "192.168.10.32"
		}
	}
	p := NodeParams{CgroupDriver: "systemd", ImagePullPolicy: "Never"}
	init, err := InitConfig(c, "cp-a", p, testSecrets)
	if err != nil {
		t.Fatal(err)
	}
	var initCfg InitConfiguration
	if err := yaml.Unmarshal([]byte(strings.Split(string(init), "\n---\n")[0]), &initCfg); err != nil {
		t.Fatal(err)
	}
	if got := initCfg.NodeRegistration.KubeletExtraArgs[0]; got.Name != "node-ip" || got.Value != "192.168.10.11" {
		t.Errorf("cp-a's kubelet arg %+v, want node-ip 192.168.10.11", got)
	}
	if initCfg.LocalAPIEndpoint.AdvertiseAddress != "172.28.0.11" {
		t.Errorf("advertiseAddress %s, want the host's address 172.28.0.11", initCfg.LocalAPIEndpoint.AdvertiseAddress)
	}
	if !strings.Contains(string(init), "- 192.168.10.11\n") || !strings.Contains(string(init), "- 172.28.0.11\n") {
		t.Errorf("the apiserver's certSANs lack an address of cp-a:\n%s", init)
	}
	joinW, err := JoinConfig(c, "w-b", p, testSecrets, "sha256:"+strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	var j JoinConfiguration
	if err := yaml.UnmarshalStrict(joinW, &j); err != nil || j.NodeRegistration.KubeletExtraArgs[0].Value != "192.168.10.32" {
		t.Errorf("w-b's join: node-ip %+v (%v), want 192.168.10.32", j.NodeRegistration.KubeletExtraArgs, err)
	}
}
