package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestCRIBaseSpec(t *testing.T) {
	in := []byte(`{"ociVersion":"1.2.0","process":{"args":["sh"],"rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}]},"hooks":{"createContainer":[{"path":"/other"}]}}`)
	out, err := criBaseSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Process map[string]any `json:"process"`
		Hooks   struct {
			CreateContainer []struct{ Path string } `json:"createContainer"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Process["rlimits"]; ok || s.Process["args"] == nil {
		t.Errorf("process: %v (rlimits removed, the rest kept)", s.Process)
	}
	if h := s.Hooks.CreateContainer; len(h) != 2 || h[0].Path != "/other" || h[1].Path != "/kind/bin/mount-product-files.sh" {
		t.Errorf("createContainer hooks: %+v", h)
	}
	if _, err := criBaseSpec([]byte("not json")); err == nil {
		t.Error("a spec that is not JSON was accepted")
	}
}

func TestKindConfig(t *testing.T) {
	var c struct {
		Kind       string
		APIVersion string `json:"apiVersion"`
		Nodes      []struct {
			Role   string
			Labels map[string]string
		}
		ContainerdConfigPatches []string `json:"containerdConfigPatches"`
		KubeadmConfigPatches    []string `json:"kubeadmConfigPatches"`
	}
	if err := yaml.UnmarshalStrict([]byte(KindConfig("3.6.16-0", "registry.k8s.io/pause:3.10.2")), &c); err != nil {
		t.Fatal(err)
	}
	var zones []string
	for _, n := range c.Nodes[1:] {
		zones = append(zones, n.Labels["topology.kubernetes.io/zone"])
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" || len(c.Nodes) != 4 || c.Nodes[0].Role != "control-plane" || strings.Join(zones, ",") != "az-a,az-b,az-c" {
		t.Errorf("config: %+v", c)
	}
	all := strings.Join(append(c.ContainerdConfigPatches, c.KubeadmConfigPatches...), "\n")
	for _, want := range []string{`sandbox_image = "registry.k8s.io/pause:3.10.2"`, "restrict_oom_score_adj = true", "imageTag: 3.6.16-0", "failCgroupV1: false"} {
		if !strings.Contains(all, want) {
			t.Errorf("patches lack %q:\n%s", want, all)
		}
	}
}

func TestKindNodeImageRef(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, b := range []string{"kind/containerd", "kind/ctr", "kind/containerd-shim-runc-v2", "kind/crictl", "bin/kubeadm", "bin/kubelet", "bin/kubectl", "bin/etcd"} {
		write(b, b)
	}
	in := KindInputs{BaseFiles: filepath.Join(dir, "base"), Overlay: filepath.Join(dir, "overlay"), KindBin: filepath.Join(dir, "kind"),
		BinDir: filepath.Join(dir, "bin"), Images: []string{write("img/a.tar", "a")}}
	write("base/usr/local/bin/entrypoint", "v1")
	write("overlay/hactl-lab-cni", "loop")
	a, err := KindNodeImageRef(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, KindNodeImageRepo+":"+KubernetesVersion+"-") {
		t.Errorf("ref %s", a)
	}
	if b, _ := KindNodeImageRef(in); b != a {
		t.Errorf("same inputs, another ref: %s %s", a, b)
	}
	write("overlay/hactl-lab-cni", "loop v2")
	if c, _ := KindNodeImageRef(in); c == a {
		t.Error("an overlay change kept the ref")
	}
	// With the images' inputs key, a rebuilt archive (new docker timestamps) keeps the ref; a new
	// key changes it.
	in.ImagesInputs = write("bin/kube-images.inputs", "key1")
	d, _ := KindNodeImageRef(in)
	write("img/a.tar", "a, built again")
	if e, _ := KindNodeImageRef(in); e != d {
		t.Error("an archive rebuilt from the same inputs changed the ref")
	}
	write("bin/kube-images.inputs", "key2")
	if f, _ := KindNodeImageRef(in); f == d {
		t.Error("new image inputs kept the ref")
	}
	os.Remove(filepath.Join(dir, "bin/etcd"))
	if _, err := KindNodeImageRef(in); err == nil {
		t.Error("a missing input was not an error")
	}
}
