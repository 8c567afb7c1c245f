package images

import (
	"archive/tar"
	"bufio"
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
		w := &indexWalk{files: files, seen: map[string]bool{}}
		if err = w.index(b, 0); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = w.out
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

// maxDescriptors bounds the manifests and indexes one archive's index may lead to (a real
// multi-platform image has a few dozen); each blob is visited once, so a crafted archive of
// indexes that name each other many times over costs no more than its size.
const maxDescriptors = 4096

type indexWalk struct {
	files map[string][]byte
	seen  map[string]bool
	out   []Platform
}

func (w *indexWalk) index(index []byte, depth int) error {
	if depth > 4 {
		return errors.New("image indexes nested too deep")
	}
	var idx struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	for _, d := range idx.Manifests {
		if d.Platform != nil && d.Platform.Architecture != "" {
			w.out = append(w.out, *d.Platform)
			continue
		}
		name := blobPath(d.Digest)
		if w.seen[name] {
			continue
		}
		if w.seen[name] = true; len(w.seen) > maxDescriptors {
			return fmt.Errorf("more than %d manifests and indexes", maxDescriptors)
		}
		b, ok := w.files[name]
		if !ok {
			return fmt.Errorf("%s: not in the archive", name)
		}
		if strings.Contains(d.MediaType, "index") || strings.Contains(d.MediaType, "manifest.list") {
			if err := w.index(b, depth+1); err != nil {
				return err
			}
			continue
		}
		var m struct {
			Config descriptor `json:"config"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if m.Config.Digest == "" {
			return fmt.Errorf("%s: a manifest without a config", name)
		}
		pl, err := configPlatform(w.files, blobPath(m.Config.Digest))
		if err != nil {
			return err
		}
		w.out = append(w.out, pl)
	}
	return nil
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

// maxJSON bounds one JSON member of an archive (ArchiveImages' bound too).
const maxJSON = 16 << 20

// jsonFiles reads, by cleaned name, every archive member that holds JSON: the regular files up to
// maxJSON whose first non-blank byte is '{' or '['; layers are skipped unread (a seekable file).
// A member over maxJSON that is JSON is an error, not skipped, so that a large index is not
// mistaken for a missing one.
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
		if h.Typeflag != tar.TypeReg || strings.HasSuffix(h.Name, "layer.tar") {
			continue
		}
		br := bufio.NewReader(tr)
		first, err := firstByte(br)
		if err != nil || (first != '{' && first != '[') {
			continue
		}
		if h.Size > maxJSON {
			return nil, fmt.Errorf("%s: %s: a JSON member of %d bytes, over the %d bytes read", p, h.Name, h.Size, maxJSON)
		}
		b, err := io.ReadAll(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p, h.Name, err)
		}
		name := path.Clean(h.Name)
		if !json.Valid(b) {
			if name == "manifest.json" || name == "index.json" {
				return nil, fmt.Errorf("%s: %s: not valid JSON", p, name)
			}
			continue // a layer that happens to start like JSON
		}
		files[name] = b
	}
}

// firstByte peeks at the first byte that is not JSON white space.
func firstByte(br *bufio.Reader) (byte, error) {
	for n := 1; n <= 64; n++ {
		b, err := br.Peek(n)
		if len(b) < n {
			return 0, err
		}
		switch c := b[n-1]; c {
		case ' ', '\t', '\r', '\n':
		default:
			return c, nil
		}
	}
	return 0, errors.New("no content")
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

// JoinPlatforms is platforms as "linux/amd64, linux/arm64/v8".
func JoinPlatforms(platforms []Platform) string {
	s := make([]string, len(platforms))
	for i, p := range platforms {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
