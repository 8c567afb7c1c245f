package images

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"busybox:1":                    "docker.io/library/busybox:1",
		"me/app:v1":                    "docker.io/me/app:v1",
		"registry.k8s.io/pause:3.10.2": "registry.k8s.io/pause:3.10.2",
		"localhost/app:1":              "localhost/app:1",
		"reg:5000/app:1":               "reg:5000/app:1",
		"hactl-lab.local/probe:abc":    "hactl-lab.local/probe:abc",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func writeTar(t *testing.T, files map[string][]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "a.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n]))})
		_, _ = tw.Write(files[n])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func TestArchiveImages(t *testing.T) {
	m, _ := json.Marshal([]map[string]any{{"RepoTags": []string{"registry.k8s.io/pause:3.10.2", "busybox:1"}}, {"RepoTags": []string{"registry.k8s.io/pause:3.10.2"}}})
	got, err := ArchiveImages(writeTar(t, map[string][]byte{"blobs/x": []byte("layer"), "manifest.json": m}))
	if err != nil || !slices.Equal(got, []string{"docker.io/library/busybox:1", "registry.k8s.io/pause:3.10.2"}) {
		t.Errorf("docker save archive: %v, %v", got, err)
	}
	idx, _ := json.Marshal(map[string]any{"manifests": []map[string]any{{"annotations": map[string]string{"io.containerd.image.name": "registry.k8s.io/kube-proxy:v1.37.2"}}}})
	if got, err := ArchiveImages(writeTar(t, map[string][]byte{"index.json": idx, "oci-layout": []byte("{}")})); err != nil || !slices.Equal(got, []string{"registry.k8s.io/kube-proxy:v1.37.2"}) {
		t.Errorf("OCI archive: %v, %v", got, err)
	}
	if _, err := ArchiveImages(writeTar(t, map[string][]byte{"x": []byte("y")})); err == nil || !strings.Contains(err.Error(), "neither manifest.json") {
		t.Errorf("no index: %v", err)
	}
	untagged, _ := json.Marshal([]map[string]any{{"RepoTags": nil}})
	if _, err := ArchiveImages(writeTar(t, map[string][]byte{"manifest.json": untagged})); err == nil || !strings.Contains(err.Error(), "names no image") {
		t.Errorf("untagged: %v", err)
	}
	p := filepath.Join(t.TempDir(), "text.tar")
	_ = os.WriteFile(p, []byte(strings.Repeat("not a tar ", 100)), 0o644)
	if _, err := ArchiveImages(p); err == nil {
		t.Error("text file accepted")
	}
}
