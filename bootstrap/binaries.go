package bootstrap

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
func CheckBinaries(c *v1alpha1.Cluster) error {
	bins := c.Spec.Etcd.Binaries
	for _, b := range []struct{ field, path string }{
		{"spec.etcd.binaries.etcd", bins.Etcd}, {"spec.etcd.binaries.etcdctl", bins.Etcdctl}, {"spec.etcd.binaries.etcdutl", bins.Etcdutl},
	} {
		if b.path == "" {
			continue
		}
		v, err := binaryVersion(b.path)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", b.field, b.path, err)
		}
		if v != "" && v != c.Spec.Etcd.Version {
			return fmt.Errorf("%s: %s is etcd %s but spec.etcd.version is %s: use the binaries of that version or change the version",
				b.field, b.path, v, c.Spec.Etcd.Version)
		}
	}
	return nil
}

// binaryVersion returns the etcd module version recorded in a Go binary, or "" when the build info
// names no etcd module (then the version cannot be checked locally).
func binaryVersion(path string) (string, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("not a Go binary with build info (is it an etcd release binary?): %w", err)
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
			return v, nil
		}
	}
	return "", nil
}
