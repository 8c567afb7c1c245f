package app

import (
	"fmt"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap"
	"github.com/hactl/hactl/ui"
)

// loadSpec loads, defaults and validates the spec, prints its warnings, and (withFiles) checks the
// local files it names (binaries, SSH key). Every error here is found before any host is contacted
// and exits 2.
func loadSpec(path string, p *ui.Printer, withFiles bool) (*v1alpha1.Cluster, error) {
	c, warnings, err := v1alpha1.Load(path)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		p.Warnf("%s: %s", w.Field, w.Message)
	}
	if !withFiles {
		return c, nil
	}
	if errs := v1alpha1.ValidateLocalFiles(c); len(errs) > 0 {
		return nil, &v1alpha1.ValidationError{Source: path, Errors: errs}
	}
	if err := bootstrap.CheckBinaries(c); err != nil {
		return nil, &UsageError{Err: err}
	}
	return c, nil
}

func splitList(s []string) []string {
	var out []string
	for _, x := range s {
		for _, y := range strings.Split(x, ",") {
			if y = strings.TrimSpace(y); y != "" {
				out = append(out, y)
			}
		}
	}
	return out
}

func checkNames(flag string, got, valid []string) error {
	for _, g := range got {
		ok := g == "all" && flag == "--ignore-preflight-errors"
		for _, v := range valid {
			ok = ok || g == v || (strings.HasSuffix(g, "/") && strings.HasPrefix(v, g))
		}
		if !ok {
			return &UsageError{Err: fmt.Errorf("%s: unknown name %q; valid: %s", flag, g, strings.Join(valid, ", "))}
		}
	}
	return nil
}
