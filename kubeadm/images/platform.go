package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
)

// Platform is an image's OS and CPU architecture in Go's and the OCI image spec's terms
// (GOOS/GOARCH: "linux", "amd64"; Variant for arm: "v7").
type Platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// ArchivePlatforms returns the platforms of the images a local archive holds (the formats of
// ArchiveImages), sorted and without duplicates: from each docker save image's config
// (manifest.json's Config), or from an OCI layout's index (a descriptor's platform, else its
// manifest's config), nested indexes followed. It reads the small JSON files only.
//
// Errors: ArchiveImages' for the archive, and a config or manifest named but missing or unreadable.
func ArchivePlatforms(p string) ([]Platform, error) {
	files, err := jsonFiles(p)
	if err != nil {
		return nil, err
	}
	var out []Platform
	if b, ok := files["manifest.json"]; ok {
		var m []struct {
			Config string `json:"Config"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: manifest.json: %w", p, err)
		}
		for _, e := range m {
			pl, err := configPlatform(files, e.Config)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			out = append(out, pl)
		}
	} else if b, ok := files["index.json"]; ok {
		if out, err = indexPlatforms(files, b, 0); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	} else {
		return nil, fmt.Errorf("%s: neither manifest.json (docker save) nor index.json (OCI layout) in the archive", p)
	}
	slices.SortFunc(out, func(a, b Platform) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out), nil
}

type descriptor struct {
	MediaType string    `json:"mediaType"`
	Digest    string    `json:"digest"`
	Platform  *Platform `json:"platform"`
}

func indexPlatforms(files map[string][]byte, index []byte, depth int) ([]Platform, error) {
	if depth > 4 {
		return nil, errors.New("image indexes nested too deep")
	}
	var idx struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	var out []Platform
	for _, d := range idx.Manifests {
		if d.Platform != nil && d.Platform.Architecture != "" {
			out = append(out, *d.Platform)
			continue
		}
		b, ok := files[blobPath(d.Digest)]
		if !ok {
			return nil, fmt.Errorf("%s: not in the archive", blobPath(d.Digest))
		}
		if strings.Contains(d.MediaType, "index") || strings.Contains(d.MediaType, "manifest.list") {
			more, err := indexPlatforms(files, b, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
			continue
		}
		var m struct {
			Config descriptor `json:"config"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", blobPath(d.Digest), err)
		}
		pl, err := configPlatform(files, blobPath(m.Config.Digest))
		if err != nil {
			return nil, err
		}
		out = append(out, pl)
	}
	return out, nil
}

func configPlatform(files map[string][]byte, name string) (Platform, error) {
	b, ok := files[path.Clean(name)]
	if !ok {
		return Platform{}, fmt.Errorf("image config %s: not in the archive", name)
	}
	var pl Platform
	if err := json.Unmarshal(b, &pl); err != nil {
		return Platform{}, fmt.Errorf("image config %s: %w", name, err)
	}
	if pl.Architecture == "" || pl.OS == "" {
		return Platform{}, fmt.Errorf("image config %s: no os/architecture", name)
	}
	return pl, nil
}

func blobPath(digest string) string {
	alg, hex, _ := strings.Cut(digest, ":")
	return path.Join("blobs", alg, hex)
}

// jsonFiles reads every archive member small enough to be JSON (≤ 4 MiB, not a layer) by its
// cleaned name; layers are skipped.
func jsonFiles(p string) (map[string][]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable tar archive (docker save or OCI layout): %w", p, err)
		}
		if h.Typeflag != tar.TypeReg || h.Size > 4<<20 || strings.HasSuffix(h.Name, "layer.tar") {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p, h.Name, err)
		}
		if json.Valid(b) {
			files[path.Clean(h.Name)] = b
		}
	}
}

// GOARCH maps `uname -m` to Go's (and the OCI image spec's) architecture name: x86_64 → amd64,
// aarch64/arm64 → arm64, armv7l → arm, others as they are (ppc64le, s390x, riscv64).
func GOARCH(unameM string) string {
	switch m := strings.TrimSpace(unameM); m {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "armv7l", "armv6l", "armhf":
		return "arm"
	case "i386", "i686":
		return "386"
	default:
		return m
	}
}

// Runs reports whether one of the archive's platforms runs on a linux node of Go architecture arch.
func Runs(platforms []Platform, arch string) bool {
	return slices.ContainsFunc(platforms, func(p Platform) bool { return p.OS == "linux" && p.Architecture == arch })
}
