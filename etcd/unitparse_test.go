package etcd

import (
	"strings"
	"testing"
)

// TestParseUnitFlagsRoundTrip: every flag RenderUnit writes is read back with its exact value,
// including values systemd needs quoted or escaped.
func TestParseUnitFlagsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*UnitConfig)
	}{
		{"v4 founding", func(*UnitConfig) {}},
		{"data dir with a space, percent and dollar", func(u *UnitConfig) { u.DataDir = `/var/lib/my etcd/100%/$x` }},
		{"token with a quote and backslash", func(u *UnitConfig) { u.InitialClusterToken = `lab-"a"\b` }},
		{"existing", func(u *UnitConfig) { u.InitialClusterState = StateExisting }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := unitFor(t, specWith("172.28.0.11", "fd00::12", "172.28.0.13"), 1, StateNew)
			tc.mutate(&u)
			unit, err := RenderUnit(u)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseUnitFlags(unit)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"name":                        u.Name,
				"data-dir":                    u.DataDir,
				"initial-cluster":             u.InitialCluster,
				"initial-cluster-state":       string(u.InitialClusterState),
				"initial-cluster-token":       u.InitialClusterToken,
				"initial-advertise-peer-urls": strings.Join(u.InitialAdvertisePeerURLs, ","),
				"advertise-client-urls":       strings.Join(u.AdvertiseClientURLs, ","),
				"listen-client-urls":          strings.Join(u.ListenClientURLs, ","),
				"client-cert-auth":            "true",
				"tls-min-version":             u.TLSMinVersion,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("--%s = %q, want %q", k, got[k], v)
				}
			}
			if len(got) != 26 {
				t.Errorf("parsed %d flags, want the 26 the template writes: %v", len(got), got)
			}
		})
	}
}

func TestParseUnitFlagsErrors(t *testing.T) {
	for _, tc := range []struct{ unit, want string }{
		{"[Service]\nType=notify\n", "no ExecStart"},
		{"ExecStart=/usr/local/bin/etcd \"--data-dir=/x\n", "unterminated"},
		{"ExecStart=/usr/local/bin/etcd --name=a \\\n  --name=b\n", "given twice"},
	} {
		if _, err := ParseUnitFlags([]byte(tc.unit)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseUnitFlags(%q) = %v, want an error saying %q", tc.unit, err, tc.want)
		}
	}
}
