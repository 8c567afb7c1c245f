package specload

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

const kubeDoc = `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  ssh: {identityFile: id, knownHostsFile: ssh/known_hosts}
  hosts:
  - {name: a, address: 10.0.0.1, zone: z1, roles: [etcd, control-plane]}
  - {name: b, address: 10.0.0.2, zone: z2, roles: [etcd]}
  - {name: c, address: 10.0.0.3, zone: z3, roles: [etcd]}
  - {name: w, address: 10.0.0.4, zone: z3, roles: [worker]}
  etcd:
    version: v3.5.21
    binaries: {etcd: etcd, etcdctl: etcdctl}
  kubernetes:
    version: v1.37.2
    nodeSubnet: 10.0.0.0/24
    binaries: {kubelet: etcd, kubeadm: etcd, kubectl: etcd}
    imageArchives: [images.tar]
`

// writeArchive writes a docker-save-like tarball at path whose manifest.json names refs.
func writeArchive(t *testing.T, path string, refs ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	layer := []byte(strings.Repeat("l", 4096))
	for _, e := range []struct {
		name string
		data []byte
	}{{"blobs/sha256/0000", layer}} {
		_ = tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data))})
		_, _ = tw.Write(e.data)
	}
	m, _ := json.Marshal([]map[string]any{{"RepoTags": refs, "Config": "x", "Layers": []string{"blobs/sha256/0000"}}})
	_ = tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(m))})
	_, _ = tw.Write(m)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateKubeLocalFiles(t *testing.T) {
	allImages := func(c *v1alpha1.Cluster) []string { return c.Spec.Kubernetes.KubeImages() }
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string, c *v1alpha1.Cluster)
		want  []string
		msg   string
	}{
		{"valid", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			writeArchive(t, filepath.Join(dir, "images.tar"), allImages(c)...)
		}, nil, ""},
		{"archive missing", func(t *testing.T, dir string, c *v1alpha1.Cluster) {}, []string{"spec.kubernetes.imageArchives[0]"}, "does not exist"},
		{"archive unreadable", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			if err := os.WriteFile(filepath.Join(dir, "images.tar"), []byte("not a tarball at all, just text that is long enough to be read as a header block"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"spec.kubernetes.imageArchives[0]"}, "archive"},
		{"archive lacks an image", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			imgs := allImages(c)
			writeArchive(t, filepath.Join(dir, "images.tar"), slices.DeleteFunc(imgs, func(s string) bool { return strings.Contains(s, "kube-proxy") })...)
		}, []string{"spec.kubernetes.imageArchives"}, "lack registry.k8s.io/kube-proxy:v1.37.2"},
		{"coredns missing says how to skip it", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			imgs := allImages(c)
			writeArchive(t, filepath.Join(dir, "images.tar"), imgs[:len(imgs)-1]...)
		}, []string{"spec.kubernetes.imageArchives"}, "coreDNS: false"},
		{"kubelet configuration with an unknown field", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			writeArchive(t, filepath.Join(dir, "images.tar"), allImages(c)...)
			p := filepath.Join(dir, "kubelet.yaml")
			_ = os.WriteFile(p, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailSwapOn: false\nmaxPodz: 10\n"), 0o644)
			c.Spec.Kubernetes.KubeletConfigurationFile = p
		}, []string{"spec.kubernetes.kubeletConfigurationFile"}, `unknown field "maxPodz"`},
		{"kubelet configuration setting cgroupDriver", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			writeArchive(t, filepath.Join(dir, "images.tar"), allImages(c)...)
			p := filepath.Join(dir, "kubelet.yaml")
			_ = os.WriteFile(p, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"), 0o644)
			c.Spec.Kubernetes.KubeletConfigurationFile = p
		}, []string{"spec.kubernetes.kubeletConfigurationFile"}, "spec.kubernetes.runtime.cgroupDriver"},
		{"kubelet configuration of another kind", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			writeArchive(t, filepath.Join(dir, "images.tar"), allImages(c)...)
			p := filepath.Join(dir, "kubelet.yaml")
			_ = os.WriteFile(p, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"), 0o644)
			c.Spec.Kubernetes.KubeletConfigurationFile = p
		}, []string{"spec.kubernetes.kubeletConfigurationFile"}, "want apiVersion kubelet.config.k8s.io/v1beta1"},
		{"binary not executable", func(t *testing.T, dir string, c *v1alpha1.Cluster) {
			writeArchive(t, filepath.Join(dir, "images.tar"), allImages(c)...)
			p := filepath.Join(dir, "kubelet")
			_ = os.WriteFile(p, []byte("x"), 0o644)
			c.Spec.Kubernetes.Binaries.Kubelet = p
		}, []string{"spec.kubernetes.binaries.kubelet"}, "chmod +x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := localFilesDir(t)
			writeKey(t, filepath.Join(dir, "id"), "")
			c := decodeDoc(t, kubeDoc, dir)
			tt.setup(t, dir, c)
			errs := ValidateLocalFiles(c)
			if got := fields(errs); !slices.Equal(got, tt.want) {
				t.Fatalf("errors at %v, want %v: %v", got, tt.want, errs)
			}
			if tt.msg != "" && !strings.Contains(errs.ToAggregate().Error(), tt.msg) {
				t.Errorf("%v lacks %q", errs, tt.msg)
			}
		})
	}
}

func TestReadKubeletConfiguration(t *testing.T) {
	dir := localFilesDir(t)
	c := decodeDoc(t, kubeDoc, dir)
	p := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailSwapOn: false\nmaxPods: 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Spec.Kubernetes.KubeletConfigurationFile = p
	m, err := ReadKubeletConfiguration(c)
	if err != nil || m["failSwapOn"] != false || m["maxPods"] != float64(50) {
		t.Fatalf("ReadKubeletConfiguration = %v, %v", m, err)
	}
}

func TestReadKubeletConfigurationRefuses(t *testing.T) {
	dir := localFilesDir(t)
	c := decodeDoc(t, kubeDoc, dir)
	p := filepath.Join(dir, "kubelet.yaml")
	c.Spec.Kubernetes.KubeletConfigurationFile = p
	head := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	for body, want := range map[string]string{
		"MaxPods: 50\n":           "case-sensitive",
		"CgroupDriver: systemd\n": "case-sensitive",
		"containerRuntimeEndpoint: unix:///run/docker.sock\n": "containerRuntimeEndpoint",
		"staticPodPath: /nowhere\n":                           "staticPodPath",
		"authorization: {mode: AlwaysAllow}\n":                "AlwaysAllow",
		"authentication: {anonymous: {enabled: true}}\n":      "anonymous",
		"maxPods: 50\nmaxPods: 60\n":                          "already set",
	} {
		if err := os.WriteFile(p, []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadKubeletConfiguration(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", body, err, want)
		}
	}
}
