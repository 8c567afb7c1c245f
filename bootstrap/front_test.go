package bootstrap

import (
	"bytes"
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/ui"
)

func TestParseFrontFacts(t *testing.T) {
	out := `os|debian|
pm|apt-get
bin|haproxy
bin|curl
sum|` + strings.Repeat("ab", 32) + `|/etc/haproxy/haproxy.cfg
sum|not-a-sum|/etc/keepalived/keepalived.conf
svc|haproxy|active|enabled
svc|keepalived|inactive|disabled
stale|/etc/haproxy/haproxy.cfg.hactl-new
addr|[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},{"ifindex":7,"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.0.21","prefixlen":24},{"family":"inet","local":"10.0.0.100","prefixlen":24}]}]
`
	f, err := parseFrontFacts([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if f.OSID != "debian" || f.PkgManager != "apt-get" || !f.Have["haproxy"] || f.Have["keepalived"] || !f.Have["curl"] {
		t.Errorf("os/pm/bin: %+v", f)
	}
	if len(f.Sums) != 1 || f.Sums["/etc/haproxy/haproxy.cfg"] != strings.Repeat("ab", 32) {
		t.Errorf("sums %v: want only the valid one", f.Sums)
	}
	if f.Active["haproxy"] != "active" || f.Enabled["keepalived"] != "disabled" || !slices.Equal(f.Stale, []string{"/etc/haproxy/haproxy.cfg.hactl-new"}) {
		t.Errorf("units %v %v stale %v", f.Active, f.Enabled, f.Stale)
	}
	if iface, err := lb.InterfaceFor(netip.MustParsePrefix("10.0.0.100/24"), f.Addrs); err != nil || iface != "eth0" {
		t.Errorf("interface of the VIP: %q, %v", iface, err)
	}
	if _, err := parseFrontFacts([]byte("bash: line 1: syntax error\n")); err == nil {
		t.Error("output without an os line was accepted")
	}
}

// frontFixture is a Bootstrapper after pki for cp-a/b/c (etcd + control-plane) and lb-a/b (lb),
// with every front host reporting a fresh Debian machine on 10.0.0.0/24 with the LB packages.
func frontFixture(t *testing.T) *Bootstrapper {
	t.Helper()
	c := planTestSpec(t, 3, filepath.Join(t.TempDir(), "state"))
	c.Spec.Hosts = append(c.Spec.Hosts,
		v1alpha1.Host{Name: "lb-a", Address: "10.0.0.21", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleLB}},
		v1alpha1.Host{Name: "lb-b", Address: "10.0.0.22", Zone: "az-b", Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
	c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "10.0.0.100/24"}
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
	b, err := New(Options{Cluster: c, Printer: ui.New(&bytes.Buffer{}, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.pki(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := hostNames(b.fronts); got != "cp-a, cp-b, cp-c, lb-a, lb-b" {
		t.Fatalf("front hosts %s", got)
	}
	for _, h := range b.fronts {
		b.frontFacts[h.host.Name] = &frontFacts{OSID: "debian", PkgManager: "apt-get",
			Have: map[string]bool{"haproxy": true, "keepalived": true, "curl": true}, Sums: map[string]string{},
			Active: map[string]string{"haproxy": "inactive", "keepalived": "inactive"}, Enabled: map[string]string{},
			Addrs: []lb.IfAddr{{Interface: "eth0", Prefix: netip.PrefixFrom(h.addr, 24)}}}
	}
	return b
}

func uploads(p *frontPlan) []string {
	var out []string
	for _, f := range p.upload {
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return out
}

func TestFrontPlan(t *testing.T) {
	b := frontFixture(t)
	ctx := context.Background()
	if err := b.frontPlanPhase(ctx); err != nil {
		t.Fatal(err)
	}
	certs := []string{kubeadm.EtcdClientCertFile, kubeadm.EtcdClientKeyFile, kubeadm.EtcdCAFile}
	slices.Sort(certs)
	lbFiles := []string{lb.HAProxyConfigPath, lb.KeepalivedConfigPath}
	slices.Sort(lbFiles)
	for _, name := range []string{"cp-a", "cp-b", "cp-c"} {
		if p := b.frontPlans[name]; !slices.Equal(uploads(p), certs) || len(p.start)+len(p.reload)+len(p.packages) > 0 {
			t.Errorf("%s: uploads %v start %v reload %v; want only the etcd credentials", name, uploads(p), p.start, p.reload)
		}
	}
	for _, name := range []string{"lb-a", "lb-b"} {
		p := b.frontPlans[name]
		if !slices.Equal(uploads(p), lbFiles) || !slices.Equal(p.start, []string{"haproxy", "keepalived"}) || p.iface != "eth0" {
			t.Errorf("%s: uploads %v start %v iface %q", name, uploads(p), p.start, p.iface)
		}
	}
	if b.frontPlans["lb-a"].priority <= b.frontPlans["lb-b"].priority {
		t.Errorf("priorities lb-a %d lb-b %d: the first LB host should be preferred", b.frontPlans["lb-a"].priority, b.frontPlans["lb-b"].priority)
	}
	if !b.anyCertUploads() || !b.anyLBChanges() || b.anyPackages() {
		t.Errorf("anyCertUploads %v anyLBChanges %v anyPackages %v", b.anyCertUploads(), b.anyLBChanges(), b.anyPackages())
	}
	// The key is private: 0600 on the host.
	for _, f := range b.frontPlans["cp-a"].upload {
		if f.Path == kubeadm.EtcdClientKeyFile && f.Mode != 0o600 || f.Path == kubeadm.EtcdCAFile && f.Mode != 0o644 {
			t.Errorf("%s mode %o", f.Path, f.Mode)
		}
	}

	// Converged: every file in place, units running → nothing to do.
	for _, h := range b.fronts {
		f := b.frontFacts[h.host.Name]
		for _, df := range b.frontPlans[h.host.Name].upload {
			f.Sums[df.Path] = df.Sum
		}
		f.Active = map[string]string{"haproxy": "active", "keepalived": "active"}
		f.Enabled = map[string]string{"haproxy": "enabled", "keepalived": "enabled"}
	}
	if err := b.frontPlanPhase(ctx); err != nil {
		t.Fatal(err)
	}
	for name, p := range b.frontPlans {
		if p.changes() {
			t.Errorf("%s: converged host still plans %v", name, p.describe())
		}
	}
	if b.anyCertUploads() || b.anyLBChanges() || b.anyPackages() {
		t.Error("a converged cluster plans changes")
	}

	// One file differs → only that unit reloads; a missing package is installed.
	b.frontFacts["lb-b"].Sums[lb.KeepalivedConfigPath] = strings.Repeat("0", 64)
	delete(b.frontFacts["lb-a"].Have, "curl")
	if err := b.frontPlanPhase(ctx); err != nil {
		t.Fatal(err)
	}
	if p := b.frontPlans["lb-b"]; !slices.Equal(p.reload, []string{"keepalived"}) || len(p.start) > 0 || !slices.Equal(uploads(p), []string{lb.KeepalivedConfigPath}) {
		t.Errorf("lb-b: %v", p.describe())
	}
	if p := b.frontPlans["lb-a"]; !slices.Equal(p.packages, []string{"curl"}) || !b.anyPackages() {
		t.Errorf("lb-a: %v", p.describe())
	}

	// No interface in the VIP's network: the host is named.
	b.frontFacts["lb-b"].Addrs = []lb.IfAddr{{Interface: "eth1", Prefix: netip.MustParsePrefix("192.168.9.2/24")}}
	if err := b.frontPlanPhase(ctx); err == nil || !strings.Contains(err.Error(), "lb-b: no interface has an address in the VIP's network 10.0.0.0/24") {
		t.Errorf("VIP network missing on lb-b: %v", err)
	}
	// An interface named in the spec that the host lacks.
	b.spec.Spec.LoadBalancer.Interface = "bond0"
	b.frontFacts["lb-b"].Addrs = []lb.IfAddr{{Interface: "eth0", Prefix: netip.MustParsePrefix("10.0.0.22/24")}}
	if err := b.frontPlanPhase(ctx); err == nil || !strings.Contains(err.Error(), `lb-a: spec.loadBalancer.interface "bond0" has no address on this host (it has eth0)`) {
		t.Errorf("missing spec interface: %v", err)
	}
}
