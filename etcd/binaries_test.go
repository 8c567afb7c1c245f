package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestCheckBinariesRefusesWrongPrograms uses the test binary itself (a Go program that is not etcd)
// and a non-Go file: both must be refused before any host is contacted.
func TestCheckBinariesRefusesWrongPrograms(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notGo := filepath.Join(t.TempDir(), "etcd")
	os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct{ path, want string }{
		{self, "not go.etcd.io/etcd/server/v3"},
		{notGo, "not a Go binary"},
	} {
		c := &v1alpha1.Cluster{}
		c.Spec.Etcd.Version = "v3.6.16"
		c.Spec.Etcd.Binaries.Etcd = tc.path
		err := CheckBinaries(c).ToAggregate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "spec.etcd.binaries.etcd") {
			t.Errorf("%s: err = %v, want it to name the field and say %q", tc.path, err, tc.want)
		}
	}
}

// TestDownloadSkipsLocalBinaryChecks: CheckBinaries has nothing to check for a download install
// (the host reports its architecture; the URL must fit it).
func TestDownloadSkipsLocalBinaryChecks(t *testing.T) {
	c := &v1alpha1.Cluster{}
	c.Spec.Etcd.Version = "v3.6.16"
	c.Spec.Etcd.Download = &v1alpha1.EtcdDownload{URL: "https://example.com/etcd-v3.6.16-linux-amd64.tar.gz", SHA256: strings.Repeat("ab", 32)}
	if errs := CheckBinaries(c); len(errs) > 0 {
		t.Fatal(errs)
	}
}
