package etcd

import (
	"debug/buildinfo"
	"fmt"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
)

// etcdModules are the modules whose version an etcd binary's build info reports.
var etcdModules = []string{"go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdutl/v3"}

// CheckBinaries checks locally, before any host is contacted, that every etcd binary in the spec is a
// Go binary of spec.etcd.version (read from its embedded build info, as `go version -m` shows it).
// It returns an error naming the field and the version found.
//
// A download install (spec.etcd.download) has no local binaries: nothing is checked here; the
// install command checks the tarball's sha256, its etcd version and that etcd runs on the host.
func CheckBinaries(c *v1alpha1.Cluster) error {
	if c.Spec.Etcd.Download != nil {
		return nil
	}
	bins := c.Spec.Etcd.Binaries
	for _, b := range []struct{ field, path, main string }{
		{"spec.etcd.binaries.etcd", bins.Etcd, "go.etcd.io/etcd/server/v3"},
		{"spec.etcd.binaries.etcdctl", bins.Etcdctl, "go.etcd.io/etcd/etcdctl/v3"},
		{"spec.etcd.binaries.etcdutl", bins.Etcdutl, "go.etcd.io/etcd/etcdutl/v3"},
	} {
		if b.path == "" {
			continue
		}
		mainPkg, v, err := binaryVersion(b.path)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", b.field, b.path, err)
		}
		if mainPkg != b.main {
			return fmt.Errorf("%s: %s is the Go program %q, not %s (an etcd release binary): point it at the right file", b.field, b.path, mainPkg, b.main)
		}
		if v == "" {
			return fmt.Errorf("%s: %s records no etcd module version, so hactl cannot check it is %s", b.field, b.path, c.Spec.Etcd.Version)
		}
		if v != c.Spec.Etcd.Version {
			return fmt.Errorf("%s: %s is etcd %s but spec.etcd.version is %s: use the binaries of that version or change the version",
				b.field, b.path, v, c.Spec.Etcd.Version)
		}
	}
	return nil
}

// binaryVersion returns the main package path and the etcd module version recorded in a Go binary's
// build info (version "" when no etcd module is named).
func binaryVersion(path string) (mainPkg, version string, err error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("not a Go binary with build info (is it an etcd release binary?): %w", err)
	}
	versions := map[string]string{bi.Main.Path: bi.Main.Version}
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil && d.Replace.Version != "" {
			v = d.Replace.Version
		}
		versions[d.Path] = v
	}
	for _, m := range etcdModules {
		if v := versions[m]; v != "" && v != "(devel)" && strings.HasPrefix(v, "v3.") {
			return bi.Path, v, nil
		}
	}
	return bi.Path, "", nil
}
