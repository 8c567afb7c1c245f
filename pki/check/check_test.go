package check

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/pki"
)

// testPKI is a state dir's PKI with one member's certificates, plus a foreign CA.
func testPKI(t *testing.T) (dir string, ca, member, foreign *pki.CA) {
	t.Helper()
	dir = t.TempDir()
	ca, _, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.EnsureMember(dir, "cp-a", []netip.Addr{netip.MustParseAddr("10.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ReadCert(pki.CertPath(pki.MemberDir(dir, "cp-a"), "server"))
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err = pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir, ca, &pki.CA{Cert: cert}, foreign
}

func TestCheckCert(t *testing.T) {
	_, ca, member, foreign := testPKI(t)
	now := time.Now()
	for _, tc := range []struct {
		name     string
		c        *pki.CA
		now      time.Time
		signed   bool
		problems []string
	}{
		{"member certificate", member, now, true, nil},
		{"the CA itself", ca, now, true, nil},
		{"expires within 30 days", member, member.Cert.NotAfter.Add(-10 * 24 * time.Hour), true, []string{"expires in 10 days"}},
		{"expired", member, member.Cert.NotAfter.Add(time.Hour), true, []string{"expired on"}},
		{"another CA", foreign, now, false, []string{"not signed by the CA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := checkCert("x.crt", tc.c.Cert, ca.Cert, tc.now)
			if cc.SignedByCA != tc.signed || len(cc.Problems) != len(tc.problems) {
				t.Fatalf("signed %v problems %q; want %v %q", cc.SignedByCA, cc.Problems, tc.signed, tc.problems)
			}
			for i, p := range tc.problems {
				if !strings.Contains(cc.Problems[i], p) {
					t.Errorf("problem %q lacks %q", cc.Problems[i], p)
				}
			}
			if cc.Fingerprint != pki.Fingerprint(tc.c.Cert) {
				t.Errorf("fingerprint %s", cc.Fingerprint)
			}
		})
	}
	cc := checkCert("x.crt", member.Cert, ca.Cert, now)
	if got := strings.Join(cc.SANs(), ","); got != "DNS:cp-a,DNS:localhost,IP:10.0.0.1,IP:127.0.0.1,IP:::1" {
		t.Errorf("SANs %s", got)
	}
}

// TestHostCertsCommand runs the remote command locally: it reads certificates only (never keys, never
// hidden upload temp files).
func TestHostCertsCommand(t *testing.T) {
	dir, _, _, _ := testPKI(t)
	host := filepath.Join(t.TempDir(), "pki")
	os.MkdirAll(host, 0o700)
	crt, _ := os.ReadFile(pki.CertPath(pki.MemberDir(dir, "cp-a"), "server"))
	key, _ := os.ReadFile(pki.KeyPath(pki.MemberDir(dir, "cp-a"), "server"))
	os.WriteFile(filepath.Join(host, "server.crt"), crt, 0o644)
	os.WriteFile(filepath.Join(host, "server.key"), key, 0o600)
	os.WriteFile(filepath.Join(host, ".server.crt.hactl-tmp-0011"), crt, 0o600)
	os.WriteFile(filepath.Join(host, "broken.crt"), []byte("nope"), 0o644)
	member := v1alpha1.Host{Name: "cp-a", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}}
	out, err := exec.Command("/bin/sh", "-c", strings.ReplaceAll(hostCertsCommand(member), etcd.RemotePKIDir, host)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "server.key") || strings.Contains(string(out), "hactl-tmp") {
		t.Fatalf("read more than certificates:\n%s", out)
	}
	certs := parseHostCerts(out)
	if len(certs) != 2 || certs[0].path != filepath.Join(host, "broken.crt") || certs[0].err == nil ||
		certs[1].path != filepath.Join(host, "server.crt") || certs[1].cert == nil {
		t.Fatalf("certs %+v", certs)
	}
	// No /etc/etcd/pki at all: no output, no failure.
	if out, err := exec.Command("/bin/sh", "-c", strings.ReplaceAll(hostCertsCommand(member), etcd.RemotePKIDir, filepath.Join(host, "none"))).Output(); err != nil || len(out) != 0 {
		t.Errorf("missing dir: %q %v", out, err)
	}

	// A control-plane host that is also a member: its etcd certificates, then kube-apiserver's
	// etcd CA and client certificate (not its key); a missing one is simply not listed.
	kube := filepath.Join(t.TempDir(), "kubernetes")
	os.MkdirAll(filepath.Join(kube, "pki", "etcd"), 0o755)
	os.WriteFile(filepath.Join(kube, "pki", "etcd", "ca.crt"), crt, 0o644)
	os.WriteFile(filepath.Join(kube, "pki", "apiserver-etcd-client.key"), key, 0o600)
	both := v1alpha1.Host{Name: "cp-a", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}}
	cmd := strings.ReplaceAll(strings.ReplaceAll(hostCertsCommand(both), etcd.RemotePKIDir, host), "/etc/kubernetes", kube)
	out, err = exec.Command("/bin/sh", "-c", cmd).Output()
	if err != nil {
		t.Fatal(err)
	}
	certs = parseHostCerts(out)
	if len(certs) != 3 || certs[2].path != filepath.Join(kube, "pki", "etcd", "ca.crt") || certs[2].cert == nil || strings.Contains(string(out), ".key") {
		t.Errorf("control-plane host: %+v", certs)
	}
}

// TestCheckPKIWithoutHosts: no local CA is an error saying what to run; an unreachable host is
// reported by name while the state dir's certificates are still checked.
func TestCheckPKIWithoutHosts(t *testing.T) {
	spec := testSpec(filepath.Join(t.TempDir(), "state"))
	if _, err := Run(context.Background(), Options{Cluster: spec}); !errors.As(err, new(*NoLocalCAError)) ||
		!strings.Contains(err.Error(), "run 'hactl bootstrap' first") {
		t.Fatalf("err = %v, want *NoLocalCAError", err)
	}
	issueStateDirPKI(t, spec) // what bootstrap's pki phase creates
	for i := range spec.Spec.Hosts {
		spec.Spec.Hosts[i].Address = "127.0.0.1"
		spec.Spec.Hosts[i].Port = 1 // nothing listens: connection refused
	}
	keyDir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	spec.Spec.SSH.IdentityFile = filepath.Join(keyDir, "id")
	os.WriteFile(spec.Spec.SSH.IdentityFile, pem.EncodeToMemory(blk), 0o600)
	spec.Spec.SSH.KnownHostsFile = filepath.Join(keyDir, "known_hosts")
	spec.Spec.SSH.ConnectTimeout.Duration = 2 * time.Second
	rep, err := Run(context.Background(), Options{Cluster: spec})
	if err == nil || rep == nil {
		t.Fatalf("rep %v err %v, want a report and an error", rep, err)
	}
	if rep.OK || len(rep.Hosts) != 3 || rep.Hosts[0].Error == "" || !strings.Contains(err.Error(), "cp-a") {
		t.Errorf("report %+v err %v", rep.Hosts, err)
	}
	if len(rep.Local) != 9 || len(rep.Problems) != 0 { // ca, 3 x (server, peer), 2 clients
		t.Errorf("local %d certificates, problems %q", len(rep.Local), rep.Problems)
	}
	for _, c := range rep.Local {
		if !c.SignedByCA || c.DaysLeft < 300 {
			t.Errorf("%s: %+v", c.Path, c)
		}
	}
}

// testSpec is a defaulted 3-member spec (cp-a, cp-b, cp-c: etcd and control-plane) with its state
// dir at stateDir.
func testSpec(stateDir string) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
	c.Metadata.Name = "lab"
	c.Spec.StateDir = stateDir
	for i, z := range []string{"a", "b", "c"} {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "cp-" + z, Address: fmt.Sprintf("10.0.0.%d", i+11), Zone: "az-" + z,
			Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}})
	}
	c.Spec.Etcd.Version = "v3.6.16"
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
	return c
}

// issueStateDirPKI creates the state dir's CA, every member's server and peer certificates and the
// two client certificates, as bootstrap's pki phase does.
func issueStateDirPKI(t *testing.T, c *v1alpha1.Cluster) {
	t.Helper()
	dir := filepath.Join(c.Spec.StateDir, "pki")
	ca, _, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range c.Spec.Hosts {
		if _, err := ca.EnsureMember(dir, h.Name, []netip.Addr{netip.MustParseAddr(h.Address)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range []struct{ name, cn string }{{"hactl-etcd-client", "hactl"}, {"apiserver-etcd-client", "kube-apiserver-etcd-client"}} {
		if _, err := ca.EnsureClient(dir, cl.name, cl.cn); err != nil {
			t.Fatal(err)
		}
	}
}
