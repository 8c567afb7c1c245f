package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// ModuleProxy is a GOPROXY directory (the file:// protocol of `go help goproxy`) serving the
// repository's root module at one version, so `go install github.com/hactl/hactl/cmd/hactl@VERSION`
// runs here as it runs for a user against proxy.golang.org, although this repository is published
// nowhere. Everything else comes from the machine's own GOPROXY.
type ModuleProxy struct {
	// Dir is the proxy's root directory.
	Dir string
	// Version is the pseudo-version it serves: v0.0.0-<HEAD's commit time>-<12 hex digits of the
	// module zip's sha256>, so the same sources give the same version (and the go command's module
	// and build caches are hit on the next run).
	Version string
}

// Environ is what the go command needs to install from the proxy: GOPROXY with the proxy first
// (then the machine's own), and GONOSUMDB for the module (the checksum database has never seen
// it).
func (p ModuleProxy) Environ(goproxy string) []string {
	if goproxy == "" {
		goproxy = "https://proxy.golang.org,direct"
	}
	return []string{"GOPROXY=file://" + p.Dir + "," + goproxy, "GONOSUMDB=" + ModulePath}
}

// WriteModuleProxy writes the root module of the repository at root into a proxy under dir: the
// files git tracks (`git ls-files --cached`), as they are in the working tree (uncommitted changes
// to them are in; untracked files are not: lab dirs, keys and build output never are), zipped by
// golang.org/x/mod/zip, which leaves out what a module zip may not hold (nested modules:
// scheduler/, cmd/hactl-operator/, tools/; vendor directories). Errors: git's, the zip rules' (a
// file over the size limits, an invalid path), I/O.
func WriteModuleProxy(ctx context.Context, root, dir string) (ModuleProxy, error) {
	out, err := runCmd(ctx, nil, nil, "git", "-C", root, "ls-files", "-z", "--cached")
	if err != nil {
		return ModuleProxy{}, fmt.Errorf("module proxy: %w", err)
	}
	var files []modzip.File
	for _, rel := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		if rel == "" {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			if os.IsNotExist(err) { // deleted in the working tree, not yet in the index
				continue
			}
			return ModuleProxy{}, err
		}
		files = append(files, repoFile{root: root, rel: rel, info: fi})
	}
	when, err := runCmd(ctx, nil, nil, "git", "-C", root, "log", "-1", "--format=%ct")
	if err != nil {
		return ModuleProxy{}, fmt.Errorf("module proxy: %w", err)
	}
	var secs int64
	if _, err := fmt.Sscan(strings.TrimSpace(when), &secs); err != nil {
		return ModuleProxy{}, fmt.Errorf("module proxy: git log's commit time %q: %w", when, err)
	}
	t := time.Unix(secs, 0).UTC()

	// The zip is made twice: once under a placeholder version to hash the content, once under the
	// version derived from that hash (the version is part of every path in the zip).
	var probe bytes.Buffer
	if err := modzip.Create(&probe, module.Version{Path: ModulePath, Version: "v0.0.0"}, files); err != nil {
		return ModuleProxy{}, fmt.Errorf("module proxy: %w", err)
	}
	sum := sha256.Sum256(probe.Bytes())
	version := module.PseudoVersion("v0", "", t, hex.EncodeToString(sum[:])[:12])
	mv := module.Version{Path: ModulePath, Version: version}
	var z bytes.Buffer
	if err := modzip.Create(&z, mv, files); err != nil {
		return ModuleProxy{}, fmt.Errorf("module proxy: %w", err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return ModuleProxy{}, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t})
	if err != nil {
		return ModuleProxy{}, err
	}
	at := filepath.Join(dir, filepath.FromSlash(ModulePath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return ModuleProxy{}, err
	}
	for name, b := range map[string][]byte{
		version + ".zip":  z.Bytes(),
		version + ".mod":  goMod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := writeFileAtomic(filepath.Join(at, name), b, 0o644); err != nil {
			return ModuleProxy{}, err
		}
	}
	return ModuleProxy{Dir: dir, Version: version}, nil
}

// repoFile is one file of the working tree as golang.org/x/mod/zip.File.
type repoFile struct {
	root, rel string
	info      os.FileInfo
}

func (f repoFile) Path() string                 { return f.rel }
func (f repoFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f repoFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.rel)) }
