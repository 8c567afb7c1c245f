// Package images reads container image archives (docker save and OCI layout tarballs) for the
// air-gapped install: which image references an archive holds, without reading its layers.
package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// ArchiveImages returns the image references a local image archive holds: a `docker save` tarball
// (manifest.json: each image's RepoTags) or an OCI image layout tarball (index.json: each
// manifest's "io.containerd.image.name" or "org.opencontainers.image.ref.name" annotation), the
// two formats `ctr images import` reads. It reads the tar headers and those two small files only
// (the layers are skipped, not read, when the file can seek).
//
// Errors: the file cannot be opened or read (wrapping the *fs.PathError), is not a tar archive,
// holds neither index, or names no image.
func ArchiveImages(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var refs []string
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable tar archive (docker save or OCI layout): %w", path, err)
		}
		switch h.Name {
		case "manifest.json", "./manifest.json":
			var m []struct {
				RepoTags []string `json:"RepoTags"`
			}
			if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&m); err != nil {
				return nil, fmt.Errorf("%s: manifest.json: %w", path, err)
			}
			found = true
			for _, e := range m {
				refs = append(refs, e.RepoTags...)
			}
		case "index.json", "./index.json":
			var idx struct {
				Manifests []struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"manifests"`
			}
			if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&idx); err != nil {
				return nil, fmt.Errorf("%s: index.json: %w", path, err)
			}
			found = true
			for _, m := range idx.Manifests {
				if n := m.Annotations["io.containerd.image.name"]; n != "" {
					refs = append(refs, n)
				} else if n := m.Annotations["org.opencontainers.image.ref.name"]; n != "" && n != "latest" {
					refs = append(refs, n)
				}
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: neither manifest.json (docker save) nor index.json (OCI layout) in the archive", path)
	}
	for i, r := range refs {
		refs[i] = Normalize(r)
	}
	slices.Sort(refs)
	refs = slices.Compact(refs)
	if len(refs) == 0 {
		return nil, fmt.Errorf("%s: the archive names no image (docker save needs NAME:TAG arguments, not image IDs)", path)
	}
	return refs, nil
}

// Normalize returns an image reference the way containerd names it after an import (the Docker
// reference rules of github.com/distribution/reference): a name without a registry host (no "."
// or ":" in its first element, and not "localhost") is on docker.io, and a one-element name there
// is under "library/": "busybox:1" → "docker.io/library/busybox:1", "me/app:v1" →
// "docker.io/me/app:v1"; "registry.k8s.io/pause:3.10.2" stays.
func Normalize(ref string) string {
	first, rest, found := strings.Cut(ref, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return ref
	}
	if !found {
		return "docker.io/library/" + ref
	}
	return "docker.io/" + first + "/" + rest
}
