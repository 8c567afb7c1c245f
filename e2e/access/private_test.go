//go:build e2e

package access

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/report"
)

// privateAddrs are cp-a/b/c's addresses on the lab's second (internal) network in
// TestPrivateAddress: the cluster network, while hactl reaches the hosts on the lab network.
var privateAddrs = map[string]string{"cp-a": "172.29.0.51", "cp-b": "172.29.0.52", "cp-c": "172.29.0.53"}

// TestPrivateAddress: hosts with two networks. hactl reaches them at address; etcd's peers talk
// over privateAddress (peer URLs, the connections themselves), clients keep address, and the
// certificates carry both. A privateAddress the host does not have is refused by the preflight,
// naming the host.
func TestPrivateAddress(t *testing.T) {
	freshCP(t)
	ctx := context.Background()
	for h, a := range privateAddrs {
		if err := suite.Lab.ConnectNetwork(ctx, h, lab.InternalNetworkName, a); err != nil {
			t.Fatal(err)
		}
	}
	withPrivate := func(wrong string) func(c *v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) {
			for i := range c.Spec.Hosts {
				h := &c.Spec.Hosts[i]
				if a, ok := privateAddrs[h.Name]; ok {
					h.PrivateAddress = a
				}
				if h.Name == "cp-b" && wrong != "" {
					h.PrivateAddress = wrong
				}
			}
		}
	}
	// An address cp-b does not have: the preflight names the host, nothing is installed.
	r := suite.Hactl(t, "plan", "-f", variantSpec(t, lab.VariantSudo, withPrivate("172.29.0.99")))
	if r.Code != 1 || !strings.Contains(r.Stderr, "cp-b") || !strings.Contains(r.Stderr, "privateAddress 172.29.0.99") || !strings.Contains(r.Stderr, "is on no interface of this host") {
		t.Errorf("privateAddress on no interface: exit %d, want 1 naming cp-b:\n%s", r.Code, r.Stderr)
	}
	// test ! -e exits 0 only when the unit is absent: the unit there, or docker exec failing, fails.
	if out, err := suite.Lab.Exec(ctx, "cp-b", "test", "!", "-e", etcd.RemoteUnitPath); err != nil {
		t.Errorf("cp-b after the refused plan: %s is there (or could not be checked): %v %s", etcd.RemoteUnitPath, err, out)
	}

	spec := variantSpec(t, lab.VariantSudo, withPrivate(""))
	res := suite.BootstrapJSON(t, spec)
	for _, m := range res.Members {
		if m.Action != report.ActionCreate {
			t.Errorf("%s: %s", m.Name, m.Action)
		}
	}
	healthy(t, &suite, spec)
	for h, priv := range privateAddrs {
		public, _ := suite.Lab.Host(h)
		unit := suite.ExecOn(t, h, "cat", etcd.RemoteUnitPath)
		for _, want := range []string{
			"--listen-peer-urls=https://" + priv + ":2380", "--initial-advertise-peer-urls=https://" + priv + ":2380",
			"--advertise-client-urls=https://" + public.Address + ":2379",
		} {
			if !strings.Contains(unit, want) {
				t.Errorf("%s: etcd.service lacks %s:\n%s", h, want, unit)
			}
		}
		for _, cert := range []string{etcd.RemotePeerCert, etcd.RemoteServerCert} {
			san := suite.ExecOn(t, h, "openssl", "x509", "-in", cert, "-noout", "-ext", "subjectAltName")
			if !strings.Contains(san, "IP Address:"+priv) || !strings.Contains(san, "IP Address:"+public.Address) {
				t.Errorf("%s: %s SANs lack %s or %s: %s", h, cert, priv, public.Address, san)
			}
		}
		// The peers' connections run over the internal network only.
		conns := suite.ExecOn(t, h, "ss", "-Htn", "state", "established", "( sport = :2380 or dport = :2380 )")
		if strings.TrimSpace(conns) == "" {
			t.Errorf("%s: no established peer connection", h)
		}
		for _, l := range strings.Split(strings.TrimSpace(conns), "\n") {
			if l != "" && !strings.Contains(l, "172.29.0.5") {
				t.Errorf("%s: a peer connection outside the internal network: %s", h, l)
			}
		}
	}
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: re-run %s", m.Name, m.Action)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprint(suite.ExecOn(t, "cp-a", "ip", "-brief", "address")))
	}
}

// TestHostOwnBastion: one member behind its own jump host (hosts[*].ssh.bastion) while the others
// are reached directly, with no spec.ssh.bastion: hactl logs in to in-c through the bastion (as
// root, its own user) and reaches its etcd client URL through it too (bootstrap's health check,
// status); cp-a and cp-b talk to in-c over their privateAddress on the internal network.
func TestHostOwnBastion(t *testing.T) {
	freshCP(t)
	ctx := context.Background()
	if err := suite.Lab.Recreate(ctx, "in-c"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"cp-a", "cp-b"} {
		if err := suite.Lab.ConnectNetwork(ctx, h, lab.InternalNetworkName, privateAddrs[h]); err != nil {
			t.Fatal(err)
		}
	}
	inC, err := suite.Lab.Host("in-c")
	if err != nil {
		t.Fatal(err)
	}
	before := suite.ExecOn(t, lab.BastionHost, "sh", "-c", "journalctl -u ssh --no-pager -o cat | grep -c 'Accepted publickey for "+lab.SudoUser+" ' || true")
	spec := variantSpec(t, lab.VariantSudo, func(c *v1alpha1.Cluster) {
		for i := range c.Spec.Hosts {
			h := &c.Spec.Hosts[i]
			switch h.Name {
			case "cp-a", "cp-b":
				h.PrivateAddress = privateAddrs[h.Name]
			case "cp-c":
				*h = v1alpha1.Host{Name: "in-c", Address: inC.Address, Zone: inC.Zone, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd},
					SSH: &v1alpha1.HostSSH{User: "root", Bastion: &v1alpha1.Bastion{Address: lab.BastionAddress, User: lab.SudoUser}}}
			}
		}
	})
	res := suite.BootstrapJSON(t, spec)
	for _, m := range res.Members {
		if m.Action != report.ActionCreate {
			t.Errorf("%s: %s", m.Name, m.Action)
		}
	}
	healthy(t, &suite, spec) // status reads in-c's member through its bastion
	after := suite.ExecOn(t, lab.BastionHost, "sh", "-c", "journalctl -u ssh --no-pager -o cat | grep -c 'Accepted publickey for "+lab.SudoUser+" ' || true")
	if strings.TrimSpace(after) == strings.TrimSpace(before) {
		t.Errorf("the bastion saw no login of %s (before %s, after %s)", lab.SudoUser, before, after)
	}
	if out := suite.ExecOn(t, "in-c", "sh", "-c", "journalctl -u ssh --no-pager -o cat | grep -c 'Accepted publickey for root ' || true"); strings.TrimSpace(out) == "0" {
		t.Error("in-c: no root login (hosts[*].ssh.user)")
	}
	unit := suite.ExecOn(t, "in-c", "cat", etcd.RemoteUnitPath)
	if !strings.Contains(unit, "https://"+privateAddrs["cp-a"]+":2380") {
		t.Errorf("in-c's --initial-cluster does not name cp-a's privateAddress:\n%s", unit)
	}
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: re-run %s", m.Name, m.Action)
		}
	}
}
