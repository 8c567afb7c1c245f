package etcd

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/golden"
)

func specWith(addrs ...string) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{
		APIVersion: v1alpha1.APIVersion,
		Kind:       v1alpha1.Kind,
		Metadata:   v1alpha1.ObjectMeta{Name: "lab"},
		Spec: v1alpha1.ClusterSpec{
			Etcd: v1alpha1.Etcd{
				Version:           "v3.6.16",
				DataDir:           "/var/lib/etcd",
				ClientPort:        2379,
				PeerPort:          2380,
				HeartbeatInterval: v1alpha1.Duration{Duration: 100 * time.Millisecond},
				ElectionTimeout:   v1alpha1.Duration{Duration: 1000 * time.Millisecond},
				QuotaBackendBytes: 2147483648,
				AutoCompaction:    v1alpha1.AutoCompaction{Mode: "periodic", Retention: "1h"},
			},
		},
	}
	for i, a := range addrs {
		name := "cp-" + string(rune('a'+i))
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: name, Address: a, Zone: "az-" + string(rune('a'+i)),
			Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}})
	}
	c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "lb-a", Address: "172.28.0.99", Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
	return c
}

func TestURL(t *testing.T) {
	tests := []struct {
		scheme string
		addr   string
		port   int
		want   string
	}{
		{"https", "172.28.0.11", 2379, "https://172.28.0.11:2379"},
		{"https", "fd00:28::11", 2380, "https://[fd00:28::11]:2380"},
		{"https", "::1", 2379, "https://[::1]:2379"},
		{"https", "::ffff:10.0.0.1", 2379, "https://10.0.0.1:2379"},
		{"http", "127.0.0.1", 2381, "http://127.0.0.1:2381"},
		{"https", "fe80::1%eth0", 2380, "https://[fe80::1%25eth0]:2380"},
	}
	for _, tt := range tests {
		if got := URL(tt.scheme, netip.MustParseAddr(tt.addr), tt.port); got != tt.want {
			t.Errorf("URL(%s, %s, %d) = %s, want %s", tt.scheme, tt.addr, tt.port, got, tt.want)
		}
	}
}

func TestInitialCluster(t *testing.T) {
	ms, err := MembersFromSpec(specWith("172.28.0.13", "fd00::12", "172.28.0.11"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("members %v: lb host included or etcd host lost", ms)
	}
	// Reordered input gives the same string.
	rev := []Member{ms[2], ms[0], ms[1]}
	want := "cp-a=https://172.28.0.13:2380,cp-b=https://[fd00::12]:2380,cp-c=https://172.28.0.11:2380"
	for _, in := range [][]Member{ms, rev} {
		if got := InitialCluster(in); got != want {
			t.Errorf("InitialCluster = %s, want %s", got, want)
		}
	}
	if got := ClientURLs(ms); strings.Join(got, ",") != "https://172.28.0.13:2379,https://[fd00::12]:2379,https://172.28.0.11:2379" {
		t.Errorf("ClientURLs = %v", got)
	}
}

func unitFor(t *testing.T, c *v1alpha1.Cluster, self int, state ClusterState) UnitConfig {
	t.Helper()
	ms, err := MembersFromSpec(c)
	if err != nil {
		t.Fatal(err)
	}
	members := ms
	if state == StateExisting {
		members = ms[:self+1] // the running members plus the joining one
	}
	return NewUnitConfig(c, members, ms[self], state, "lab-0123456789abcdef")
}

func TestRenderUnitGolden(t *testing.T) {
	tests := []struct {
		golden string
		unit   UnitConfig
	}{
		{"unit-v4.golden", unitFor(t, specWith("172.28.0.11", "172.28.0.12", "172.28.0.13"), 0, StateNew)},
		{"unit-v6.golden", unitFor(t, specWith("fd00:28::11", "fd00:28::12", "fd00:28::13"), 1, StateNew)},
		{"unit-existing.golden", unitFor(t, specWith("172.28.0.11", "172.28.0.12", "172.28.0.13"), 2, StateExisting)},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			got, err := RenderUnit(tt.unit)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := RenderUnit(tt.unit)
			if !bytes.Equal(got, again) {
				t.Error("RenderUnit is not deterministic")
			}
			golden.Check(t, filepath.Join("testdata", tt.golden), got, "go test ./etcd -run TestRenderUnitGolden -update")
			assertNoEnvironment(t, got)
			systemdVerify(t, tt.unit)
		})
	}
}

// assertNoEnvironment checks that etcd gets its settings from flags only.
func assertNoEnvironment(t *testing.T, unit []byte) {
	t.Helper()
	for _, bad := range []string{"Environment", "ETCD_", "--config-file"} {
		if bytes.Contains(unit, []byte(bad)) {
			t.Errorf("unit contains %q", bad)
		}
	}
}

// systemdVerify runs `systemd-analyze verify` on the unit when the tool exists; without it the
// check is logged as not run, or fails the test with HACTL_REQUIRE_SYSTEMD_ANALYZE=1 (make unit
// sets it). ExecStart must name an existing executable for verify to pass, so the binary is
// swapped for a stub.
func systemdVerify(t *testing.T, u UnitConfig) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		msg := "systemd-analyze is not installed on this machine (Debian: apt-get install systemd): the unit is not verified by systemd"
		if os.Getenv("HACTL_REQUIRE_SYSTEMD_ANALYZE") == "1" {
			t.Fatal(msg + " (HACTL_REQUIRE_SYSTEMD_ANALYZE=1)")
		}
		t.Log(msg)
		return
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "etcd")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	u.Binary = stub
	data, err := RenderUnit(u)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, UnitName)
	if err := os.WriteFile(unit, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), sa, "verify", "--man=no", unit).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// verify exits 0 on ignored settings ("Unknown key", "Failed to parse"); any line about our
	// file is a failure, other lines are host noise.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, unit) {
			t.Errorf("systemd-analyze verify: %s", line)
		} else if strings.TrimSpace(line) != "" {
			t.Logf("systemd-analyze verify: %s", line)
		}
	}
}

func TestRenderUnitRejects(t *testing.T) {
	base := unitFor(t, specWith("172.28.0.11", "172.28.0.12", "172.28.0.13"), 0, StateNew)
	tests := []struct {
		name   string
		mutate func(*UnitConfig)
		want   string
	}{
		{"bad state", func(u *UnitConfig) { u.InitialClusterState = "joining" }, "--initial-cluster-state"},
		{"no token", func(u *UnitConfig) { u.InitialClusterToken = "" }, "--initial-cluster-token"},
		{"relative data dir", func(u *UnitConfig) { u.DataDir = "etcd" }, "--data-dir"},
		{"election too short", func(u *UnitConfig) { u.ElectionTimeoutMs = 400 }, "--election-timeout"},
		{"no peer urls", func(u *UnitConfig) { u.ListenPeerURLs = nil }, "--listen-peer-urls"},
		{"bad name", func(u *UnitConfig) { u.Name = "CP A" }, "--name"},
		{"tls 1.1", func(u *UnitConfig) { u.TLSMinVersion = "TLS1.1" }, "--tls-min-version"},
		{"newline in token", func(u *UnitConfig) { u.InitialClusterToken = "a\nb" }, "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := base
			tt.mutate(&u)
			_, err := RenderUnit(u)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RenderUnit error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestMetricsURLs(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("fd00::11")
	for _, tt := range []struct {
		addr   string
		member netip.Addr
		want   string
	}{
		{"", v4, "http://127.0.0.1:2381"},
		{"host", v4, "http://127.0.0.1:2381,http://10.0.0.11:2381"},
		{"host", v6, "http://127.0.0.1:2381,http://[fd00::11]:2381"},
		{"0.0.0.0", v4, "http://0.0.0.0:2381"},
		{"::", v6, "http://[::]:2381"},
	} {
		if got := strings.Join(metricsURLs(tt.addr, tt.member), ","); got != tt.want {
			t.Errorf("metricsURLs(%q, %s) = %s, want %s", tt.addr, tt.member, got, tt.want)
		}
	}
}
