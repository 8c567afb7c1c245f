package etcd

import (
	"debug/buildinfo"
	"fmt"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// etcdModules are the modules whose version an etcd binary's build info reports.
var etcdModules = []string{"go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdutl/v3"}

// CheckBinaries checks locally, before any host is contacted, that every etcd binary in the spec is a
// Go binary of spec.etcd.version (read from its embedded build info, as `go version -m` shows it).
// It returns one field.Invalid per binary that is not, at its field path (with the version found),
// for v1alpha1.Cluster.ValidationError (which adds the spec file's line).
//
// A download install (spec.etcd.download) has no local binaries: nothing is checked here; the
// install command checks the tarball's sha256, its etcd version and that etcd runs on the host.
func CheckBinaries(c *v1alpha1.Cluster) field.ErrorList {
	if c.Spec.Etcd.Download != nil {
		return nil
	}
	bins := c.Spec.Etcd.Binaries
	bp := field.NewPath("spec", "etcd", "binaries")
	var errs field.ErrorList
	for _, b := range []struct {
		name, path, main string
	}{
		{"etcd", bins.Etcd, "go.etcd.io/etcd/server/v3"},
		{"etcdctl", bins.Etcdctl, "go.etcd.io/etcd/etcdctl/v3"},
		{"etcdutl", bins.Etcdutl, "go.etcd.io/etcd/etcdutl/v3"},
	} {
		if b.path == "" {
			continue
		}
		fp := bp.Child(b.name)
		mainPkg, v, err := binaryVersion(b.path)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(fp, b.path, err.Error()))
		case mainPkg != b.main:
			errs = append(errs, field.Invalid(fp, b.path, fmt.Sprintf("is the Go program %q, not %s (an etcd release binary): point it at the right file", mainPkg, b.main)))
		case v == "":
			errs = append(errs, field.Invalid(fp, b.path, fmt.Sprintf("records no etcd module version, so hactl cannot check it is %s", c.Spec.Etcd.Version)))
		case v != c.Spec.Etcd.Version:
			errs = append(errs, field.Invalid(fp, b.path, fmt.Sprintf("is etcd %s but spec.etcd.version is %s: use the binaries of that version or change the version", v, c.Spec.Etcd.Version)))
		}
	}
	return errs
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
