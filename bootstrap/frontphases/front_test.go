package frontphases

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/etcdphases"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

func TestFrontFactsFrom(t *testing.T) {
	out := "sum=" + strings.Repeat("ab", 32) + " /etc/haproxy/haproxy.cfg\n" +
		"sum=not-a-sum /etc/keepalived/keepalived.conf\n" +
		"sum=" + strings.Repeat("cd", 32) + " /etc/haproxy/haproxy.cfg.hactl-new\n" +
		"command=haproxy\ncommand=curl\n" +
		"unit=Id=haproxy.service\nunit=ActiveState=active\nunit=UnitFileState=enabled\nunit=\n" +
		"unit=Id=keepalived.service\nunit=ActiveState=inactive\nunit=UnitFileState=disabled\nunit=\n" +
		`addrs=[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},{"ifindex":7,"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.0.21","prefixlen":24},{"family":"inet","local":"10.0.0.100","prefixlen":24}]}]` + "\n" +
		"end=ok\n"
	h := frontHost{host: v1alpha1.Host{Name: "lb-a"}, lb: true}
	r := factsRequest(h)
	pf, err := provision.ParseFacts(r, []byte(out), time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pf.Host = provision.HostInfo{OSID: "debian", PackageManager: "apt-get"}
	f, err := factsFrom(h, pf)
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
	pf.AddrsJSON = []byte("bash: line 1: syntax error")
	if _, err := factsFrom(h, pf); err == nil {
		t.Error("addresses that are not ip -json output were accepted")
	}
	if !slices.Contains(r.Files, lb.HAProxyConfigPath+stagedSuffix) || !r.Addrs || !slices.Equal(r.Units, []string{"haproxy", "keepalived"}) {
		t.Errorf("request %+v", r)
	}
}

// frontFixture is a Bootstrapper after pki for cp-a/b/c (etcd + control-plane) and lb-a/b (lb),
// with every front host reporting a fresh Debian machine on 10.0.0.0/24 with the LB packages.
func frontFixture(t *testing.T) *Group {
	t.Helper()
	c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
	c.Metadata.Name = "lab"
	c.Spec.StateDir = filepath.Join(t.TempDir(), "state")
	for i, z := range []string{"a", "b", "c"} {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "cp-" + z, Address: fmt.Sprintf("10.0.0.%d", 1+i), Zone: "az-" + z,
			Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}})
	}
	c.Spec.Etcd.Version = "v3.6.16"
	c.Spec.Hosts = append(c.Spec.Hosts,
		v1alpha1.Host{Name: "lb-a", Address: "10.0.0.21", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleLB}},
		v1alpha1.Host{Name: "lb-b", Address: "10.0.0.22", Zone: "az-b", Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
	c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "10.0.0.100/24"}
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
	run := runctx.New(c, ui.New(&bytes.Buffer{}, false, false), false, provision.SpecOptions{})
	eg, err := etcdphases.New(run, etcdphases.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pki, err := eg.Phases().Pick(etcdphases.PhasePKI)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki[0].Run(context.Background()); err != nil { // the state dir's CA and apiserver-etcd-client
		t.Fatal(err)
	}
	b := New(run)
	if got := hostNames(b.fronts); got != "cp-a, cp-b, cp-c, lb-a, lb-b" {
		t.Fatalf("front hosts %s", got)
	}
	for _, h := range b.fronts {
		b.facts[h.host.Name] = &frontFacts{OSID: "debian", PkgManager: "apt-get",
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
	if err := (&Plan{b}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	certs := []string{kubeadm.EtcdClientCertFile, kubeadm.EtcdClientKeyFile, kubeadm.EtcdCAFile}
	slices.Sort(certs)
	lbFiles := []string{lb.HAProxyConfigPath, lb.KeepalivedConfigPath}
	slices.Sort(lbFiles)
	for _, name := range []string{"cp-a", "cp-b", "cp-c"} {
		if p := b.plans[name]; !slices.Equal(uploads(p), certs) || len(p.start)+len(p.reload)+len(p.packages) > 0 {
			t.Errorf("%s: uploads %v start %v reload %v; want only the etcd credentials", name, uploads(p), p.start, p.reload)
		}
	}
	for _, name := range []string{"lb-a", "lb-b"} {
		p := b.plans[name]
		if !slices.Equal(uploads(p), lbFiles) || !slices.Equal(p.start, []string{"haproxy", "keepalived"}) || p.iface != "eth0" {
			t.Errorf("%s: uploads %v start %v iface %q", name, uploads(p), p.start, p.iface)
		}
	}
	if b.plans["lb-a"].priority <= b.plans["lb-b"].priority {
		t.Errorf("priorities lb-a %d lb-b %d: the first LB host should be preferred", b.plans["lb-a"].priority, b.plans["lb-b"].priority)
	}
	if !(&EtcdCerts{b}).ShouldRun() || !(&Install{b}).ShouldRun() || (&Packages{b}).ShouldRun() {
		t.Errorf("anyCertUploads %v anyLBChanges %v anyPackages %v", (&EtcdCerts{b}).ShouldRun(), (&Install{b}).ShouldRun(), (&Packages{b}).ShouldRun())
	}
	// The key is private: 0600 on the host.
	for _, f := range b.plans["cp-a"].upload {
		if f.Path == kubeadm.EtcdClientKeyFile && f.Mode != 0o600 || f.Path == kubeadm.EtcdCAFile && f.Mode != 0o644 {
			t.Errorf("%s mode %o", f.Path, f.Mode)
		}
	}

	// Converged: every file in place, units running → nothing to do.
	for _, h := range b.fronts {
		f := b.facts[h.host.Name]
		for _, df := range b.plans[h.host.Name].upload {
			f.Sums[df.Path] = df.Sum
		}
		f.Active = map[string]string{"haproxy": "active", "keepalived": "active"}
		f.Enabled = map[string]string{"haproxy": "enabled", "keepalived": "enabled"}
	}
	if err := (&Plan{b}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	for name, p := range b.plans {
		if p.changes() {
			t.Errorf("%s: converged host still plans %v", name, p.describe())
		}
	}
	if (&EtcdCerts{b}).ShouldRun() || (&Install{b}).ShouldRun() || (&Packages{b}).ShouldRun() {
		t.Error("a converged cluster plans changes")
	}

	// One file differs → only that unit reloads; a missing package is installed.
	b.facts["lb-b"].Sums[lb.KeepalivedConfigPath] = strings.Repeat("0", 64)
	delete(b.facts["lb-a"].Have, "curl")
	if err := (&Plan{b}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if p := b.plans["lb-b"]; !slices.Equal(p.reload, []string{"keepalived"}) || len(p.start) > 0 || !slices.Equal(uploads(p), []string{lb.KeepalivedConfigPath}) {
		t.Errorf("lb-b: %v", p.describe())
	}
	if p := b.plans["lb-a"]; !slices.Equal(p.packages, []string{"curl"}) || !(&Packages{b}).ShouldRun() {
		t.Errorf("lb-a: %v", p.describe())
	}

	// No interface in the VIP's network: the host is named.
	b.facts["lb-b"].Addrs = []lb.IfAddr{{Interface: "eth1", Prefix: netip.MustParsePrefix("192.168.9.2/24")}}
	if err := (&Plan{b}).Run(ctx); err == nil || !strings.Contains(err.Error(), "lb-b: no interface has an address in the VIP's network 10.0.0.0/24") {
		t.Errorf("VIP network missing on lb-b: %v", err)
	}
	// An interface named in the spec that the host lacks.
	b.run.Spec.Spec.LoadBalancer.Interface = "bond0"
	b.facts["lb-b"].Addrs = []lb.IfAddr{{Interface: "eth0", Prefix: netip.MustParsePrefix("10.0.0.22/24")}}
	if err := (&Plan{b}).Run(ctx); err == nil || !strings.Contains(err.Error(), `lb-a: spec.loadBalancer.interface "bond0" has no address on this host (it has eth0)`) {
		t.Errorf("missing spec interface: %v", err)
	}
}
