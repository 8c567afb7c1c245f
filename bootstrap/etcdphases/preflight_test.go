package etcdphases

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// goodFacts is a host that passes every check.
func goodFacts() *Facts {
	return &Facts{UID: 0, Kernel: "Linux", Arch: "x86_64", Systemd: true, Data: DataAbsent, DiskAvail: 1 << 40,
		TimeSync: "chrony", NTPSynchronized: "yes", Sums: map[string]string{}, ListenPorts: map[int]bool{},
		Fsync: FsyncProbe{Dir: "/var/lib", Samples: 50, P50: time.Millisecond, P99: 2 * time.Millisecond}}
}

// TestPreflightChecksAndWarnings: time sync and disk latency are warnings, never failures; a
// download URL naming another architecture than the host's fails the arch check.
func TestPreflightChecksAndWarnings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		download string // spec.etcd.download.url ("" = local binaries)
		mutate   func(f *Facts)
		errs     []string // substrings of the check error (none: passes)
		warns    []string // substrings of printed warnings (none: no warning)
	}{
		{name: "all good", mutate: func(*Facts) {}},
		{name: "no time sync service", mutate: func(f *Facts) { f.TimeSync, f.NTPSynchronized = "", "no" },
			warns: []string{"cp-a: no time sync service is active", "chrony, chronyd, systemd-timesyncd"}},
		{name: "service active, not synchronised", mutate: func(f *Facts) { f.NTPSynchronized = "no" },
			warns: []string{"chrony is active but the clock is not synchronised"}},
		{name: "slow disk", mutate: func(f *Facts) { f.Fsync.P99 = 25 * time.Millisecond },
			warns: []string{"fsync p99 is 25.0 ms on the filesystem of /var/lib", "under 10ms"}},
		{name: "fsync not measured: no warning", mutate: func(f *Facts) { f.Fsync = FsyncProbe{Err: "dd: invalid oflag"} }},
		{name: "download for the host's arch", download: "http://m/etcd-v3.6.16-linux-amd64.tar.gz", mutate: func(*Facts) {}},
		{name: "download for another arch", download: "http://m/etcd-v3.6.16-linux-arm64.tar.gz", mutate: func(*Facts) {},
			errs: []string{`preflight check "arch" failed`, "host is x86_64 but spec.etcd.download.url names a aarch64 tarball"}},
		{name: "download URL naming no arch: host decides", download: "http://m/etcd.tgz", mutate: func(f *Facts) { f.Arch = "riscv64" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := planTestSpec(t, 3, filepath.Join(t.TempDir(), "state"))
			if tc.download != "" {
				spec.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{}
				spec.Spec.Etcd.Download = &v1alpha1.EtcdDownload{URL: tc.download, SHA256: strings.Repeat("ab", 32)}
			}
			var out bytes.Buffer
			b, err := New(runctx.New(spec, ui.New(&out, false, false), false, provision.SpecOptions{}), Options{})
			if err != nil {
				t.Fatal(err)
			}
			f := goodFacts()
			tc.mutate(f)
			(&Preflight{b}).warnings(b.members[0], f)
			err = (&Preflight{b}).check(b.members[0], f, "")
			if (err != nil) != (len(tc.errs) > 0) {
				t.Fatalf("check: %v, want errors %q", err, tc.errs)
			}
			for _, s := range tc.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q: %v", s, err)
				}
			}
			if got := strings.Count(out.String(), "WARNING"); (got > 0) != (len(tc.warns) > 0) {
				t.Errorf("warnings:\n%s\nwant %q", out.String(), tc.warns)
			}
			for _, s := range tc.warns {
				if !strings.Contains(out.String(), s) {
					t.Errorf("warnings lack %q:\n%s", s, out.String())
				}
			}
		})
	}
}
