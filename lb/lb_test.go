package lb

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/golden"
	"github.com/hactl/hactl/internal/testcert"
	"github.com/hactl/hactl/lb/vrrp"
)

// The specs of the golden cases, decoded (defaulted and validated) like a user's.
const specHead = `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  ssh: {identityFile: id}
  etcd: {version: v3.6.16, binaries: {etcd: etcd}}
  hosts:
`

const labHosts = `  - {name: cp-a, address: 172.28.0.11, zone: az-a, roles: [etcd, control-plane]}
  - {name: cp-b, address: 172.28.0.12, zone: az-b, roles: [etcd, control-plane]}
  - {name: cp-c, address: 172.28.0.13, zone: az-c, roles: [etcd, control-plane]}
`

// testSecret is the VRRP secret of the cases with auth.
const testSecret = "k8s-vip1"

var cases = []struct {
	name string
	spec string
	auth bool
}{
	// The lab's shape: two dedicated LB hosts, unicast, no CA file, no auth.
	{"dedicated-unicast", labHosts + `  - {name: lb-a, address: 172.28.0.21, zone: az-a, roles: [lb]}
  - {name: lb-b, address: 172.28.0.22, zone: az-b, roles: [lb]}
  loadBalancer:
    vip: 172.28.0.100/24
    interface: eth0
`, false},
	// Three dedicated LB hosts, multicast, CA file and auth.
	{"multicast-3", labHosts + `  - {name: lb-a, address: 172.28.0.21, zone: az-a, roles: [lb]}
  - {name: lb-b, address: 172.28.0.22, zone: az-b, roles: [lb]}
  - {name: lb-c, address: 172.28.0.23, zone: az-c, roles: [lb]}
  loadBalancer:
    vip: 172.28.0.100/24
    interface: eth0
    virtualRouterID: 52
    mode: multicast
    auth: {env: HACTL_VRRP_PASSWORD}
    healthCheck: {caFile: /specs/kube-ca.crt, interval: 1s, fall: 2, rise: 3}
    checkWeight: -30
`, true},
	// HAProxy + Keepalived on the control-plane hosts: another port, the VIP bound, priorities
	// overridden, CA file and auth.
	{"colocated", labHosts + `  loadBalancer:
    vip: 172.28.0.100/24
    interface: eth0
    topology: colocated
    frontendPort: 8443
    priorities: {cp-a: 100, cp-b: 120, cp-c: 110}
    auth: {file: vrrp-secret}
    healthCheck: {caFile: kube-ca.crt}
`, true},
	// IPv6, nopreempt with a weight-0 check (FAULT releases the VIP), two dedicated LB hosts.
	{"ipv6-nopreempt", `  - {name: cp-a, address: "fd00:db8:28::11", zone: az-a, roles: [etcd, control-plane]}
  - {name: cp-b, address: "fd00:db8:28::12", zone: az-b, roles: [etcd, control-plane]}
  - {name: cp-c, address: "fd00:db8:28::13", zone: az-c, roles: [etcd, control-plane]}
  - {name: lb-a, address: "fd00:db8:28::21", zone: az-a, roles: [lb]}
  - {name: lb-b, address: "fd00:db8:28::22", zone: az-b, roles: [lb]}
  loadBalancer:
    vip: "fd00:db8:28::100/64"
    interface: eth0
    nopreempt: true
    checkWeight: 0
`, false},
	// A sub-second advertisement interval on an IPv4 VIP: VRRPv3 (vrrp_version 3, advert_int 0.3).
	{"vrrp3-subsecond", labHosts + `  - {name: lb-a, address: 172.28.0.21, zone: az-a, roles: [lb]}
  - {name: lb-b, address: 172.28.0.22, zone: az-b, roles: [lb]}
  loadBalancer:
    vip: 172.28.0.100/24
    interface: eth0
    advertInterval: 300ms
`, false},
}

func decode(t *testing.T, hosts string) *v1alpha1.Cluster {
	t.Helper()
	c, warns, err := v1alpha1.Decode([]byte(specHead+hosts), "cluster.yaml", v1alpha1.Dirs{Base: "/specs"}, FailoverRule)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	if len(warns) > 0 {
		t.Fatalf("spec warnings: %v", warns)
	}
	return c
}

func plan(t *testing.T, hosts string) *Config {
	t.Helper()
	cfg, err := Plan(decode(t, hosts))
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return cfg
}

func secretFor(t *testing.T, auth bool) AuthSecret {
	t.Helper()
	if !auth {
		return AuthSecret{}
	}
	s, err := NewAuthSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGolden renders every file of every host of every case and compares it with
// testdata/<case>-<host>-<file>.golden (go test ./lb -update rewrites them).
func TestGolden(t *testing.T) {
	var names []string
	for _, tc := range cases {
		cfg := plan(t, tc.spec)
		for _, n := range cfg.Nodes {
			for _, f := range []struct {
				file   string
				render func() ([]byte, error)
			}{
				{"haproxy.cfg", func() ([]byte, error) { return RenderHAProxy(cfg, n.Name) }},
				{"keepalived.conf", func() ([]byte, error) { return RenderKeepalived(cfg, n.Name, secretFor(t, tc.auth)) }},
			} {
				name := fmt.Sprintf("%s-%s-%s.golden", tc.name, n.Name, f.file)
				names = append(names, name)
				t.Run(name, func(t *testing.T) {
					got, err := f.render()
					if err != nil {
						t.Fatal(err)
					}
					again, _ := f.render()
					if !bytes.Equal(got, again) {
						t.Error("two renders differ")
					}
					golden.Check(t, filepath.Join("testdata", name), got, "go test ./lb -update")
				})
			}
		}
	}
	// No stale golden files.
	files, _ := filepath.Glob("testdata/*.golden")
	for _, f := range files {
		if !slices.Contains(names, filepath.Base(f)) {
			t.Errorf("%s: no test renders it", f)
		}
	}
}

// TestRenderedContent checks what the issue asks of the files, on every case.
func TestRenderedContent(t *testing.T) {
	for _, tc := range cases {
		cfg := plan(t, tc.spec)
		for _, n := range cfg.Nodes {
			h, err := RenderHAProxy(cfg, n.Name)
			if err != nil {
				t.Fatal(err)
			}
			k, err := RenderKeepalived(cfg, n.Name, secretFor(t, tc.auth))
			if err != nil {
				t.Fatal(err)
			}
			hs, ks := string(h), string(k)
			must := []string{"mode tcp", "balance roundrobin", "option httpchk", "http-check send meth GET uri /readyz", "http-check expect status 200",
				"stats socket /run/haproxy/admin.sock mode 660 level admin", "bind 127.0.0.1:8405", "http-request use-service prometheus-exporter if { path /metrics }",
				"monitor-uri /healthz"}
			for _, b := range cfg.Backends {
				must = append(must, fmt.Sprintf("server %s %s check check-ssl ", b.Name, b.AddrPort()))
			}
			for _, s := range must {
				if !strings.Contains(hs, s) {
					t.Errorf("%s/%s haproxy.cfg lacks %q", tc.name, n.Name, s)
				}
			}
			if (cfg.HealthCheck.CAFile != "") != strings.Contains(hs, "verify required ca-file "+RemoteCAFile+" inter") ||
				(cfg.HealthCheck.CAFile == "") != strings.Contains(hs, "verify none inter") {
				t.Errorf("%s: CA file %q but verify lines:\n%s", tc.name, cfg.HealthCheck.CAFile, hs)
			}
			must = []string{"state BACKUP", "script_user root", "enable_script_security", "track_script {\n    chk_haproxy\n  }",
				fmt.Sprintf("priority %d\n", n.Priority), fmt.Sprintf("weight %d\n", cfg.Weight), "dev eth0", "curl"}
			for _, s := range must {
				if !strings.Contains(ks, s) {
					t.Errorf("%s/%s keepalived.conf lacks %q", tc.name, n.Name, s)
				}
			}
			if strings.Contains(ks, "vrrp_strict") || strings.Contains(ks, "state MASTER") {
				t.Errorf("%s/%s keepalived.conf has vrrp_strict or state MASTER", tc.name, n.Name)
			}
			if tc.auth != strings.Contains(ks, "auth_pass "+testSecret+"\n") {
				t.Errorf("%s/%s: auth %v but auth_pass lines:\n%s", tc.name, n.Name, tc.auth, ks)
			}
			if unicast := cfg.Mode == v1alpha1.LBModeUnicast; unicast != strings.Contains(ks, "unicast_src_ip "+n.Address.String()+"\n") {
				t.Errorf("%s/%s: unicast %v, keepalived.conf:\n%s", tc.name, n.Name, unicast, ks)
			}
			for _, p := range n.Peers {
				if !strings.Contains(ks, "\n    "+p.String()+"\n") {
					t.Errorf("%s/%s: peer %s missing", tc.name, n.Name, p)
				}
			}
		}
	}
}

func TestPlan(t *testing.T) {
	cfg := plan(t, cases[0].spec)
	if got := cfg.Nodes; len(got) != 2 || got[0].Priority != 150 || got[1].Priority != 140 ||
		!slices.Equal(got[0].Peers, []netip.Addr{netip.MustParseAddr("172.28.0.22")}) ||
		!slices.Equal(got[1].Peers, []netip.Addr{netip.MustParseAddr("172.28.0.21")}) {
		t.Errorf("nodes %+v", got)
	}
	if cfg.Weight != v1alpha1.DefaultCheckWeight || cfg.Bind != "*" || cfg.FrontendPort != 6443 || cfg.AdvertInterval != 500*time.Millisecond || cfg.VRRPVersion != 3 || cfg.VirtualRouterID != 51 || len(cfg.Sysctls) != 0 {
		t.Errorf("config %+v", cfg)
	}
	if len(cfg.Backends) != 3 || cfg.Backends[2].AddrPort() != "172.28.0.13:6443" {
		t.Errorf("backends %+v", cfg.Backends)
	}
	if len(cfg.Notes) != 1 || !strings.Contains(cfg.Notes[0], "WITHOUT verifying") {
		t.Errorf("notes %q, want the verify-none note", cfg.Notes)
	}

	cfg = plan(t, cases[1].spec) // multicast, 3 nodes
	if cfg.Weight != -30 || cfg.Nodes[2].Priority != 130 || cfg.Nodes[0].Peers != nil || !cfg.Auth ||
		cfg.HealthCheck.CAFile != RemoteCAFile || cfg.HealthCheck.LocalCAFile != "/specs/kube-ca.crt" {
		t.Errorf("multicast config %+v", cfg)
	}

	cfg = plan(t, cases[2].spec) // colocated
	if cfg.Bind != "172.28.0.100" || len(cfg.Sysctls) != 1 || cfg.Sysctls[0].String() != "net.ipv4.ip_nonlocal_bind=1" ||
		cfg.Weight != 0 || cfg.Nodes[1].Priority != 120 || cfg.HealthCheck.LocalCAFile != "/specs/kube-ca.crt" {
		t.Errorf("colocated config %+v", cfg)
	}
	if len(cfg.Notes) != 1 || !strings.Contains(cfg.Notes[0], "sysctl net.ipv4.ip_nonlocal_bind=1") {
		t.Errorf("notes %q, want the non-local bind note", cfg.Notes)
	}

	cfg = plan(t, cases[3].spec) // IPv6
	if cfg.Bind != "[::]" || cfg.Weight != 0 || !cfg.Nopreempt || cfg.Backends[0].AddrPort() != "[fd00:db8:28::11]:6443" {
		t.Errorf("IPv6 config %+v", cfg)
	}

	// Interface left to detection: noted, and keepalived.conf can't be rendered until it is set.
	cfg = plan(t, strings.Replace(cases[0].spec, "    interface: eth0\n", "", 1))
	if !slices.ContainsFunc(cfg.Notes, func(s string) bool { return strings.Contains(s, "interface is detected") }) {
		t.Errorf("notes %q, want the interface note", cfg.Notes)
	}
	if _, err := RenderKeepalived(cfg, "lb-a", AuthSecret{}); err == nil || !strings.Contains(err.Error(), "interface is not known") {
		t.Errorf("render without interface: %v", err)
	}
	if err := cfg.SetInterface("lb-a", "ens3"); err != nil {
		t.Fatal(err)
	}
	if out, err := RenderKeepalived(cfg, "lb-a", AuthSecret{}); err != nil || !strings.Contains(string(out), "interface ens3\n") {
		t.Errorf("render after SetInterface: %v\n%s", err, out)
	}
	for _, bad := range []struct{ host, iface string }{{"lb-x", "eth0"}, {"lb-a", ""}, {"lb-a", "eth0 eth1"}, {"lb-a", "a-very-long-interface"}} {
		if err := cfg.SetInterface(bad.host, bad.iface); err == nil {
			t.Errorf("SetInterface(%q, %q) succeeded", bad.host, bad.iface)
		}
	}

	if _, err := Plan(&v1alpha1.Cluster{}); err == nil {
		t.Error("Plan without spec.loadBalancer succeeded")
	}
}

// TestProveFailover: what Plan produces passes; configurations that keep the VIP on a broken host,
// or break what the files rely on, are refused with the priorities and the weight named.
func TestProveFailover(t *testing.T) {
	for _, tc := range cases {
		if err := ProveFailover(plan(t, tc.spec)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name   string
		spec   int // index into cases
		mutate func(cfg *Config)
		want   []string
	}{
		{"weight too small", 0, func(cfg *Config) { cfg.Weight = -5 }, []string{
			"the VIP cannot move: when the check on lb-a fails it still advertises 145, above lb-b's 140",
			"priorities lb-a=150, lb-b=140, check weight -5"}},
		{"weight only below the next host", 1, func(cfg *Config) { cfg.Weight = -15 }, []string{
			"when the check on lb-a fails it still advertises 135, above lb-c's 130", "priorities lb-a=150, lb-b=140, lb-c=130, check weight -15"}},
		{"positive weight too small", 0, func(cfg *Config) { cfg.Weight = 8 }, []string{"check weight 8"}},
		{"overrides far apart", 2, func(cfg *Config) { cfg.Nodes[0].Priority, cfg.Nodes[1].Priority, cfg.Weight = 200, 20, -30 }, []string{
			"when the check on cp-a fails it still advertises 170, above cp-b's 20", "priorities cp-a=200, cp-b=20, cp-c=110, check weight -30", "use -190"}},
		{"same priority", 0, func(cfg *Config) { cfg.Nodes[1].Priority = 150 }, []string{"lb-a and lb-b have the same priority 150"}},
		{"empty unicast peers", 0, func(cfg *Config) { cfg.Nodes[0].Peers = nil }, []string{"unicast peers of lb-a are [], want every other LB host [172.28.0.22]"}},
		{"nopreempt with a weight", 0, func(cfg *Config) { cfg.Nopreempt, cfg.Weight = true, -20 }, []string{"nopreempt with check weight -20"}},
		{"one node", 0, func(cfg *Config) {
			cfg.Nodes = cfg.Nodes[:1]
			cfg.Nodes[0].Peers = nil
			cfg.Mode = v1alpha1.LBModeMulticast
		}, []string{"1 node(s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := plan(t, cases[tc.spec].spec)
			tc.mutate(cfg)
			err := ProveFailover(cfg)
			if err == nil {
				t.Fatal("ProveFailover passed")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
			// The renderer refuses what the proof refuses.
			if _, err := RenderKeepalived(cfg, cfg.Nodes[0].Name, secretFor(t, cfg.Auth)); err == nil {
				t.Error("RenderKeepalived rendered a configuration ProveFailover refuses")
			}
		})
	}
	var fe *vrrp.FailoverError
	cfg := plan(t, cases[0].spec)
	cfg.Weight = -10 // lb-a drops to 140 = lb-b's, and 172.28.0.21 < .22: moves
	if err := ProveFailover(cfg); err != nil {
		t.Errorf("tie won by the healthy host's higher address: %v", err)
	}
	cfg.Nodes[0].Address, cfg.Nodes[1].Peers = netip.MustParseAddr("172.28.0.99"), []netip.Addr{netip.MustParseAddr("172.28.0.99")}
	if err := ProveFailover(cfg); !errors.As(err, &fe) || !strings.Contains(err.Error(), "wins the tie with the higher address (172.28.0.99 > 172.28.0.22)") {
		t.Errorf("tie lost on the address: %v", err)
	}
}

func TestRenderErrors(t *testing.T) {
	cfg := plan(t, cases[0].spec)
	secret := secretFor(t, true)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"haproxy unknown host", errOf(RenderHAProxy(cfg, "cp-a")), "cp-a is not an LB host"},
		{"keepalived unknown host", errOf(RenderKeepalived(cfg, "nope", AuthSecret{})), "nope is not an LB host"},
		{"secret without auth", errOf(RenderKeepalived(cfg, "lb-a", secret)), "spec.loadBalancer.auth is not set"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	authCfg := plan(t, cases[1].spec)
	if _, err := RenderKeepalived(authCfg, "lb-a", AuthSecret{}); err == nil || !strings.Contains(err.Error(), "no secret was given") {
		t.Errorf("auth without secret: %v", err)
	}
	if _, err := RenderKeepalived(authCfg, "lb-a", AuthSecret{s: "a b"}); err == nil || strings.Contains(err.Error(), "a b") {
		t.Errorf("bad secret: %v", err)
	}
	bad := *cfg
	bad.HealthCheck.Fall = 0
	if _, err := RenderHAProxy(&bad, "lb-a"); err == nil {
		t.Error("fall 0 rendered")
	}
	bad = *cfg
	bad.HealthCheck.CAFile = "/etc/my ca.crt"
	if _, err := RenderHAProxy(&bad, "lb-a"); err == nil {
		t.Error("CA path with a space rendered")
	}
}

func errOf(_ []byte, err error) error { return err }

// TestAuthSecretNeverPrinted: fmt in any form, and errors, never show the secret.
func TestAuthSecretNeverPrinted(t *testing.T) {
	s, err := NewAuthSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	holder := struct {
		Secret AuthSecret
		P      *AuthSecret
	}{s, &s}
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		if out := fmt.Sprintf(f, holder); strings.Contains(out, testSecret) || strings.Contains(out, fmt.Sprintf("%x", testSecret)) {
			t.Errorf("%s shows the secret: %s", f, out)
		}
		if out := fmt.Sprintf(f, s); strings.Contains(out, testSecret) {
			t.Errorf("%s shows the secret: %s", f, out)
		}
	}
	if _, err := NewAuthSecret("toolongsecret"); err == nil || strings.Contains(err.Error(), "toolongsecret") || !strings.Contains(err.Error(), "13 characters long") {
		t.Errorf("NewAuthSecret(too long): %v", err)
	}
}

func TestInterfaceFor(t *testing.T) {
	out := []byte(`[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8},{"family":"inet6","local":"::1","prefixlen":128}]},
{"ifindex":2,"ifname":"eth0","addr_info":[{"family":"inet","local":"172.28.0.21","prefixlen":24},{"family":"inet","local":"172.28.0.100","prefixlen":24},{"family":"inet6","local":"fd00:db8:28::21","prefixlen":64}]},
{"ifindex":3,"ifname":"eth1","addr_info":[{"family":"inet","local":"10.9.0.5","prefixlen":16}]},
{"ifindex":4,"ifname":"eth2","addr_info":[]}]`)
	addrs, err := ParseIPAddrJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 6 || addrs[2] != (IfAddr{"eth0", netip.MustParsePrefix("172.28.0.21/24")}) {
		t.Errorf("addrs %v", addrs)
	}
	for _, tc := range []struct {
		vip, want, err string
	}{
		{"172.28.0.100/24", "eth0", ""},
		{"fd00:db8:28::100/64", "eth0", ""},
		{"10.9.1.1/16", "eth1", ""},
		{"192.168.0.100/24", "", "no interface has an address in the VIP's network 192.168.0.0/24"},
	} {
		got, err := InterfaceFor(netip.MustParsePrefix(tc.vip), addrs)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("InterfaceFor(%s) = %q, %v; want %q, %q", tc.vip, got, err, tc.want, tc.err)
		}
	}
	two := append(addrs, IfAddr{"br0", netip.MustParsePrefix("172.28.0.5/16")})
	if _, err := InterfaceFor(netip.MustParsePrefix("172.28.0.100/24"), two); err == nil || !strings.Contains(err.Error(), "(eth0, br0): set spec.loadBalancer.interface") {
		t.Errorf("two interfaces: %v", err)
	}
	if _, err := ParseIPAddrJSON([]byte("not json")); err == nil {
		t.Error("bad JSON parsed")
	}
}

// realTool returns the path of a validation binary. A missing one fails the test (the checks with
// the real tools must not pass silently) unless HACTL_SKIP_REAL_TOOLS is set, which skips it.
func realTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("HACTL_SKIP_REAL_TOOLS") != "" {
		t.Skipf("%s is not on PATH and HACTL_SKIP_REAL_TOOLS is set", name)
	}
	t.Fatalf("%s is not on PATH: install it (apt-get install -y haproxy keepalived curl) or set HACTL_SKIP_REAL_TOOLS=1 to skip the checks with the real tools", name)
	return ""
}

// TestHAProxyCheck runs `haproxy -c` (warnings fatal: -dW) on every rendered haproxy.cfg, with the CA
// file it references present (a fresh CA in a temp dir, where RemoteCAFile would be on a host).
func TestHAProxyCheck(t *testing.T) {
	haproxy := realTool(t, "haproxy")
	dir := t.TempDir()
	ca := filepath.Join(dir, "kube-apiserver-ca.crt")
	testcert.WriteCA(t, ca)
	for _, tc := range cases {
		cfg := plan(t, tc.spec)
		if cfg.HealthCheck.CAFile != "" {
			cfg.HealthCheck.CAFile = ca
		}
		for _, n := range cfg.Nodes {
			t.Run(tc.name+"/"+n.Name, func(t *testing.T) {
				data, err := RenderHAProxy(cfg, n.Name)
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(dir, tc.name+"-"+n.Name+".cfg")
				if err := os.WriteFile(f, data, 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(haproxy, "-dW", "-c", "-f", f).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "Configuration file is valid") {
					t.Errorf("haproxy -dW -c -f %s: %v\n%s\n%s", f, err, out, data)
				}
			})
		}
	}
	// The check is real: a missing CA file fails it.
	cfg := plan(t, cases[1].spec)
	cfg.HealthCheck.CAFile = filepath.Join(dir, "missing.crt")
	data, _ := RenderHAProxy(cfg, "lb-a")
	f := filepath.Join(dir, "missing-ca.cfg")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-dW", "-c", "-f", f).CombinedOutput(); err == nil {
		t.Errorf("haproxy -c accepted a missing CA file:\n%s", out)
	}
}

// TestKeepalivedConfigTest runs `keepalived --config-test` on every rendered keepalived.conf. It
// checks that the interface exists (loopback is refused for VRRP), so each runs in a new network
// namespace (unshare --net, root) holding a veth pair whose one end is the configured interface;
// any output (keepalived prints warnings and still exits 0 for some) fails the test.
func TestKeepalivedConfigTest(t *testing.T) {
	keepalived := realTool(t, "keepalived")
	unshare := realTool(t, "unshare")
	realTool(t, "ip")
	if _, err := os.Stat("/usr/bin/curl"); err != nil && os.Getenv("HACTL_SKIP_REAL_TOOLS") == "" {
		t.Fatalf("the check script's /usr/bin/curl is missing (keepalived would warn): apt-get install -y curl")
	}
	if out, err := exec.Command(unshare, "--net", "true").CombinedOutput(); err != nil {
		if os.Getenv("HACTL_SKIP_REAL_TOOLS") != "" {
			t.Skipf("unshare --net: %v %s", err, out)
		}
		t.Fatalf("unshare --net (needs root) failed: %v %s; set HACTL_SKIP_REAL_TOOLS=1 to skip the checks with the real tools", err, out)
	}
	dir := t.TempDir()
	check := func(t *testing.T, iface, name string, data []byte) (string, error) {
		t.Helper()
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
		script := `ip link add "$1" type veth peer name hactl-peer0 && ip link set "$1" up && exec "$2" --config-test -f "$3"`
		out, err := exec.Command(unshare, "--net", "sh", "-c", script, "sh", iface, keepalived, f).CombinedOutput()
		return string(out), err
	}
	for _, tc := range cases {
		cfg := plan(t, tc.spec)
		for _, n := range cfg.Nodes {
			t.Run(tc.name+"/"+n.Name, func(t *testing.T) {
				data, err := RenderKeepalived(cfg, n.Name, secretFor(t, tc.auth))
				if err != nil {
					t.Fatal(err)
				}
				out, err := check(t, n.Interface, tc.name+"-"+n.Name+".conf", data)
				if err != nil || out != "" {
					t.Errorf("keepalived --config-test: %v\n%s\n%s", err, out, data)
				}
			})
		}
	}
	// The check is real: an interface that does not exist fails it.
	cfg := plan(t, cases[0].spec)
	data, _ := RenderKeepalived(cfg, "lb-a", AuthSecret{})
	data = bytes.ReplaceAll(data, []byte("eth0"), []byte("eth9"))
	if out, err := check(t, "eth0", "missing-iface.conf", data); err == nil {
		t.Errorf("keepalived --config-test accepted a missing interface:\n%s", out)
	}
}

// TestFailoverRule: the spec's failover rule is Plan's own computation. For each spec (valid but for
// the failover proof: decoded without the rule), FailoverRule fails exactly when Plan does, at the
// field the user wrote, with vrrp's reason.
func TestFailoverRule(t *testing.T) {
	const lbHosts = labHosts + `  - {name: lb-a, address: 172.28.0.21, zone: az-a, roles: [lb]}
  - {name: lb-b, address: 172.28.0.22, zone: az-b, roles: [lb]}
`
	for _, tc := range []struct {
		name, lb     string
		field, value string // want: the field error's path and value ("" = the VIP fails over)
		detail       string // substring of its message
	}{
		{"default: FAULT on a failed check", "", "", "", ""},
		{"default with priorities far apart", "    priorities: {lb-a: 254, lb-b: 1}\n", "", "", ""},
		{"weight too small", "    checkWeight: -5\n", "spec.loadBalancer.checkWeight", "-5",
			"the VIP cannot move: when the check on lb-a fails it still advertises 145, above lb-b's 140"},
		{"tie lost on the address", "    priorities: {lb-a: 140, lb-b: 150}\n    checkWeight: -10\n", "spec.loadBalancer.checkWeight", "-10",
			"wins the tie with the higher address (172.28.0.22 > 172.28.0.21)"},
		{"a weight too small for priorities far apart", "    priorities: {lb-a: 254, lb-b: 1}\n    checkWeight: -200\n", "spec.loadBalancer.checkWeight", "-200",
			"when the check on lb-a fails it still advertises 54, above lb-b's 1"},
		{"weight 0", "    checkWeight: 0\n", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := specHead + lbHosts + "  loadBalancer:\n    vip: 172.28.0.100/24\n" + tc.lb
			c, _, err := v1alpha1.Decode([]byte(doc), "cluster.yaml", v1alpha1.Dirs{Base: "/specs"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			fe := FailoverRule(c)
			_, planErr := Plan(c)
			switch {
			case tc.field == "" && (fe != nil || planErr != nil):
				t.Fatalf("FailoverRule = %v, Plan: %v; want both to accept", fe, planErr)
			case tc.field == "":
			case fe == nil || planErr == nil:
				t.Fatalf("FailoverRule = %v, Plan: %v; want both to refuse", fe, planErr)
			case fe.Field != tc.field || fmt.Sprint(fe.BadValue) != tc.value || !strings.Contains(fe.Detail, tc.detail):
				t.Errorf("FailoverRule = %v; want %s = %s saying %q", fe, tc.field, tc.value, tc.detail)
			}
		})
	}
	if fe := FailoverRule(&v1alpha1.Cluster{}); fe != nil {
		t.Errorf("no load balancer: %v", fe)
	}
}
