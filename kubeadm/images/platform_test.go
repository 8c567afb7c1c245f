package images

import (
	"slices"
	"strings"
	"testing"
)

func TestArchivePlatforms(t *testing.T) {
	cfg := func(arch string) []byte { return []byte(`{"os":"linux","architecture":"` + arch + `","config":{}}`) }
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  []string
		err   string
	}{
		{"docker save", map[string][]byte{
			"manifest.json": []byte(`[{"Config":"abc.json","RepoTags":["a:1"],"Layers":["l/layer.tar"]},{"Config":"def.json","RepoTags":["b:1"]}]`),
			"abc.json":      cfg("arm64"), "def.json": cfg("amd64"),
			"l/layer.tar": []byte("{}"), // a layer is never read as JSON
		}, []string{"linux/amd64", "linux/arm64"}, ""},
		{"OCI, platform in the index", map[string][]byte{
			"index.json": []byte(`{"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:11","platform":{"os":"linux","architecture":"arm","variant":"v7"}}]}`),
		}, []string{"linux/arm/v7"}, ""},
		{"OCI, nested index, manifest and config", map[string][]byte{
			"index.json":      []byte(`{"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:aa"}]}`),
			"blobs/sha256/aa": []byte(`{"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:bb"}]}`),
			"blobs/sha256/bb": []byte(`{"config":{"digest":"sha256:cc"}}`),
			"blobs/sha256/cc": cfg("s390x"),
		}, []string{"linux/s390x"}, ""},
		{"config missing", map[string][]byte{"manifest.json": []byte(`[{"Config":"gone.json"}]`)}, nil, "image config gone.json: not in the archive"},
		{"config without architecture", map[string][]byte{"manifest.json": []byte(`[{"Config":"c.json"}]`), "c.json": []byte(`{"os":"linux"}`)}, nil, "no os/architecture"},
		{"no index", map[string][]byte{"x.json": []byte(`{}`)}, nil, "neither manifest.json"},
		{"manifest.json not JSON", map[string][]byte{"manifest.json": []byte(`[{"Config": `)}, nil, "manifest.json: not valid JSON"},
		{"OCI manifest without a config", map[string][]byte{
			"index.json":      []byte(`{"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:bb"}]}`),
			"blobs/sha256/bb": []byte(`{"layers":[]}`),
		}, nil, "a manifest without a config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ArchivePlatforms(writeTar(t, tc.files))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if !slices.Equal(s, tc.want) {
				t.Errorf("platforms %v, want %v", s, tc.want)
			}
		})
	}
}

func TestGOARCHAndRuns(t *testing.T) {
	for in, want := range map[string]string{"x86_64\n": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"} {
		if got := GOARCH(in); got != want {
			t.Errorf("GOARCH(%q) = %q, want %q", in, got, want)
		}
	}
	ps := []Platform{{OS: "linux", Architecture: "arm64"}, {OS: "windows", Architecture: "amd64"}}
	if Runs(ps, "amd64") || !Runs(ps, "arm64") {
		t.Errorf("Runs: a windows image runs on a linux node, or linux/arm64 not on arm64")
	}
	e := &PlatformError{Archive: "img.tar", Platforms: ps[:1], Arch: "amd64"}
	if !strings.Contains(e.Error(), "holds linux/arm64 only and this host is linux/amd64: refused before the import") {
		t.Errorf("PlatformError: %s", e)
	}
}

// Indexes that name each other many times over are walked once per blob: 40 descriptors at each of
// four levels would be 40^4 visits otherwise (a 20 KB archive took 10 s and 660 MB before).
func TestArchivePlatformsFanOut(t *testing.T) {
	files := map[string][]byte{"blobs/sha256/m": []byte(`{"config":{"digest":"sha256:c"}}`), "blobs/sha256/c": []byte(`{"os":"linux","architecture":"amd64"}`)}
	next, media := "m", "application/vnd.oci.image.manifest.v1+json"
	for level := 3; level >= 0; level-- {
		d := `{"mediaType":"` + media + `","digest":"sha256:` + next + `"}`
		idx := `{"manifests":[` + strings.TrimSuffix(strings.Repeat(d+",", 40), ",") + `]}`
		name := "i" + string(rune('0'+level))
		if level == 0 {
			files["index.json"] = []byte(idx)
		} else {
			files["blobs/sha256/"+name] = []byte(idx)
		}
		next, media = name, "application/vnd.oci.image.index.v1+json"
	}
	got, err := ArchivePlatforms(writeTar(t, files))
	if err != nil || len(got) != 1 || got[0].String() != "linux/amd64" {
		t.Errorf("fan-out archive: %v, %v", got, err)
	}
}
