package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeadmTestSpec = `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata:
  name: lab
spec:
  stateDir: ./state
  ssh:
    user: root
    identityFile: ./id_ed25519
    knownHostsFile: ./known_hosts
  hosts:
  - {name: cp-a, address: 172.28.0.11, zone: az-a, roles: [etcd, control-plane]}
  - {name: cp-b, address: 172.28.0.12, zone: az-b, roles: [etcd, control-plane]}
  - {name: cp-c, address: 172.28.0.13, zone: az-c, roles: [etcd, control-plane]}
  - {name: lb-a, address: 172.28.0.21, zone: az-a, roles: [lb]}
  - {name: lb-b, address: 172.28.0.22, zone: az-b, roles: [lb]}
  etcd:
    version: v3.6.16
    binaries: {etcd: ./bin/etcd}
`

const kubeadmTestLB = `  loadBalancer:
    vip: 172.28.0.100/24
`

func writeKubeadmSpec(t *testing.T, withLB bool) string {
	t.Helper()
	s := kubeadmTestSpec
	if withLB {
		s += kubeadmTestLB
	}
	p := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKubeadmConfigPrintsDocuments(t *testing.T) {
	p := writeKubeadmSpec(t, true)
	out, stderr, code := runCmd(t, "kubeadm-config", "-f", p, "--kubernetes-version", "v1.37.1", "--pod-subnet", "10.200.0.0/16",
		"--service-subnet", "10.201.0.0/16", "--image-pull-policy", "Never", "--ignore-preflight-errors", "all")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n",
		"  advertiseAddress: 172.28.0.11\n  bindPort: 6443\n",
		"  criSocket: unix:///run/containerd/containerd.sock\n  ignorePreflightErrors:\n  - all\n  imagePullPolicy: Never\n  name: cp-a\n",
		"\n---\n",
		"kind: ClusterConfiguration\n",
		"controlPlaneEndpoint: 172.28.0.100:6443\n",
		"    endpoints:\n    - https://172.28.0.11:2379\n    - https://172.28.0.12:2379\n    - https://172.28.0.13:2379\n",
		"    caFile: /etc/kubernetes/pki/etcd/ca.crt\n",
		"    certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt\n",
		"    keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key\n",
		"  certSANs:\n  - 172.28.0.100\n  - 172.28.0.11\n  - 172.28.0.12\n  - 172.28.0.13\n",
		"kubernetesVersion: v1.37.1\n",
		"  podSubnet: 10.200.0.0/16\n  serviceSubnet: 10.201.0.0/16\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}

	// Defaults: the pinned version, kubeadm's service subnet, no pull policy (kubeadm's default).
	out, stderr, code = runCmd(t, "kubeadm-config", "-f", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"kubernetesVersion: v1.37.2\n", "serviceSubnet: 10.96.0.0/12\n", "podSubnet: 10.244.0.0/16\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("default output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "imagePullPolicy") || strings.Contains(out, "ignorePreflightErrors") {
		t.Errorf("default output sets imagePullPolicy or ignorePreflightErrors:\n%s", out)
	}
}

func TestKubeadmConfigErrorsExitTwo(t *testing.T) {
	withLB := writeKubeadmSpec(t, true)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no load balancer", []string{"-f", writeKubeadmSpec(t, false)}, ":5: spec.loadBalancer: Required value"},
		{"bad version", []string{"-f", withLB, "--kubernetes-version", "latest"}, `--kubernetes-version: "latest"`},
		{"bad pod subnet", []string{"-f", withLB, "--pod-subnet", "10.244.0.0/33"}, "--pod-subnet"},
		{"subnet holds hosts", []string{"-f", withLB, "--service-subnet", "172.28.0.0/16"}, "contains the load balancer VIP"},
		{"overlapping subnets", []string{"-f", withLB, "--pod-subnet", "10.96.0.0/16"}, "overlaps the service subnet"},
		{"bad pull policy", []string{"-f", withLB, "--image-pull-policy", "sometimes"}, "--image-pull-policy"},
		{"extra argument", []string{"-f", withLB, "extra"}, `unknown command "extra"`},
		{"unknown flag", []string{"-f", withLB, "--vip", "1.2.3.4"}, "unknown flag: --vip"},
		{"missing spec", []string{"-f", filepath.Join(t.TempDir(), "none.yaml")}, "none.yaml"},
		{"missing kubelet config", []string{"-f", withLB, "--kubelet-config", filepath.Join(t.TempDir(), "kubelet.yaml")}, "--kubelet-config: open "},
		{"wrong kubelet config kind", []string{"-f", withLB, "--kubelet-config", withLB}, "--kubelet-config: has apiVersion hactl.io/v1alpha1, kind Cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := runCmd(t, append([]string{"kubeadm-config"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
				t.Errorf("exit %d stdout %q stderr %q; want 2, nothing on stdout, stderr saying %q", code, out, stderr, tc.want)
			}
		})
	}
}
