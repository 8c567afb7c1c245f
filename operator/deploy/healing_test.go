package deploy

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hactl/hactl/api/v1alpha1"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/pki"
)

// withSpares adds spare-a (az-a) and spare-c (az-c, SSH port 2222) to c, with their host keys in a
// known_hosts file (spare-c's only when known), and returns spare-a's host key line.
func withSpares(t *testing.T, c *v1alpha1.Cluster, known bool) string {
	t.Helper()
	c.Spec.SSH.User = "root"
	c.Spec.SSH.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
	c.Spec.Etcd.Spares = []v1alpha1.Spare{{Name: "spare-a", Address: "10.0.0.21", Port: 22, Zone: "az-a"}, {Name: "spare-c", Address: "10.0.0.23", Port: 2222, Zone: "az-c"}}
	var lines []string
	var first string
	for i, s := range c.Spec.Etcd.Spares {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		k, _ := ssh.NewPublicKey(pub)
		if i == 0 {
			first = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
		}
		if i == 1 && !known {
			continue
		}
		hp := s.Address
		if s.Port != 22 {
			hp = "[" + s.Address + "]:2222"
		}
		lines = append(lines, knownhosts.Line([]string{hp}, k))
	}
	if err := os.WriteFile(c.Spec.SSH.KnownHostsFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return first
}

func sshKeyFile(t *testing.T, passphrase string) string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(f, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func etcdCluster(t *testing.T, p *Plan) *hactlv1.EtcdCluster {
	t.Helper()
	var ec hactlv1.EtcdCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(p, "EtcdCluster").Object, &ec); err != nil {
		t.Fatal(err)
	}
	return &ec
}

func secretsOf(p *Plan) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, u := range p.Objects {
		if u.GetKind() == "Secret" {
			out[u.GetName()] = u
		}
	}
	return out
}

func TestBuildHealing(t *testing.T) {
	c := testCluster(t, true)
	hostKey := withSpares(t, c, true)

	// Spares without --auto-replace: report only; the certificates are issued all the same.
	p, err := Build(Options{Cluster: c, Image: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ec := etcdCluster(t, p)
	h := ec.Spec.Healing
	if h == nil || h.AutoReplace || h.SSHKeySecret != nil || h.GracePeriod.Duration != DefaultGracePeriod || h.SSHUser != "root" || len(h.Spares) != 2 {
		t.Fatalf("healing %+v", h)
	}
	if s := h.Spares[0]; s.Name != "spare-a" || s.Address != "10.0.0.21" || s.SSHPort != 22 || s.Zone != "az-a" || !slices.Equal(s.HostKeys, []string{hostKey}) || s.CertificatesSecret.Name != "hactl-etcd-spare-spare-a" {
		t.Errorf("spare-a %+v", s)
	}
	if s := h.Spares[1]; s.SSHPort != 2222 || len(s.HostKeys) != 1 {
		t.Errorf("spare-c (port 2222) %+v", s)
	}
	if m := h.Member; m == nil || m.InitialClusterToken != "t" || m.ClientPort != 2379 || m.PeerPort != 2380 {
		t.Errorf("member template %+v", m)
	}
	if ec.Spec.Members[2].Zone != "az-c" {
		t.Errorf("members carry no zone: %+v", ec.Spec.Members)
	}
	secrets := secretsOf(p)
	if _, ok := secrets[SSHKeySecret]; ok {
		t.Error("an SSH key Secret without --auto-replace")
	}
	sec := secrets["hactl-etcd-spare-spare-c"]
	if sec == nil {
		t.Fatalf("no certificate Secret for spare-c: %v", kinds(p))
	}
	data, _, _ := unstructured.NestedStringMap(sec.Object, "data")
	for _, k := range []string{"ca.crt", "server.crt", "server.key", "peer.crt", "peer.key"} {
		if data[k] == "" {
			t.Errorf("spare-c's Secret lacks %s", k)
		}
	}
	if _, ok := data["ca.key"]; ok {
		t.Error("the CA key went into a Secret")
	}
	pkiDir := filepath.Join(c.Spec.StateDir, "pki")
	cert, err := pki.ReadCert(pki.CertPath(pki.MemberDir(pkiDir, "spare-c"), pki.ServerBase))
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.CheckSANs(cert, "spare-c", []netip.Addr{netip.MustParseAddr("10.0.0.23")}); err != nil {
		t.Errorf("spare-c's server certificate: %v", err)
	}
	role := find(p, "Role")
	if !strings.Contains(mustYAML(t, role), "hactl-etcd-spare-spare-a") {
		t.Error("the Role cannot get the spares' certificate Secrets")
	}

	// --auto-replace with a key: the Secret and the reference.
	key := sshKeyFile(t, "")
	p, err = Build(Options{Cluster: c, Image: "x", Healing: &HealingOptions{AutoReplace: true, GracePeriod: 2 * time.Minute, SSHKeyFile: key}})
	if err != nil {
		t.Fatal(err)
	}
	if h := etcdCluster(t, p).Spec.Healing; !h.AutoReplace || h.SSHKeySecret == nil || h.SSHKeySecret.Name != SSHKeySecret || h.GracePeriod.Duration != 2*time.Minute {
		t.Errorf("healing %+v", h)
	}
	if s := secretsOf(p)[SSHKeySecret]; s == nil || s.Object["type"] != "kubernetes.io/ssh-auth" {
		t.Errorf("SSH key Secret %v", s)
	}
	if !strings.Contains(mustYAML(t, find(p, "Role")), SSHKeySecret) {
		t.Error("the Role cannot get the SSH key Secret")
	}
	// The Secret's data is base64: look for that, not for the PEM text it encodes.
	out, err := p.Print()
	if err != nil {
		t.Fatal(err)
	}
	priv, _, _ := unstructured.NestedString(secretsOf(p)[SSHKeySecret].Object, "data", "ssh-privatekey")
	if priv == "" || strings.Contains(string(out), priv) || strings.Contains(string(out), "PRIVATE KEY") {
		t.Errorf("Print shows the SSH key (or the Secret has no ssh-privatekey):\n%s", out)
	}
}

func TestBuildHealingRefusals(t *testing.T) {
	enc := sshKeyFile(t, "secret")
	notKey := filepath.Join(t.TempDir(), "notkey")
	_ = os.WriteFile(notKey, []byte("hello"), 0o600)
	for _, tc := range []struct {
		name   string
		spares bool
		known  bool
		h      *HealingOptions
		field  string
		msg    string
	}{
		{"auto-replace without spares", false, true, &HealingOptions{AutoReplace: true}, "--auto-replace", "no spec.etcd.spares"},
		{"grace under 3 election timeouts", true, true, &HealingOptions{GracePeriod: 4 * time.Second}, "--grace-period", "3 × spec.etcd.electionTimeout (4.5s)"},
		{"grace over a day", true, true, &HealingOptions{GracePeriod: 25 * time.Hour}, "--grace-period", "24h"},
		{"a spare without a host key", true, false, nil, "spec.etcd.spares[1]", "ssh-keyscan -p 2222 10.0.0.23"},
		{"no key at all", true, true, &HealingOptions{AutoReplace: true}, "--ssh-key", "--auto-replace needs the private key"},
		{"an encrypted key", true, true, &HealingOptions{AutoReplace: true, SSHKeyFile: enc}, "--ssh-key", "is encrypted"},
		{"not a key", true, true, &HealingOptions{AutoReplace: true, SSHKeyFile: notKey}, "--ssh-key", "not an SSH private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(t, true)
			if tc.spares {
				withSpares(t, c, tc.known)
			}
			_, err := Build(Options{Cluster: c, Image: "x", Healing: tc.h})
			var ue *UsageError
			if !errors.As(err, &ue) || ue.Field != tc.field || !strings.Contains(ue.Msg, tc.msg) {
				t.Errorf("err %v, want a UsageError at %s saying %q", err, tc.field, tc.msg)
			}
		})
	}
}

func TestBuildHealingDryRunIssuesNothing(t *testing.T) {
	c := testCluster(t, true)
	withSpares(t, c, true)
	if _, err := Build(Options{Cluster: c, Image: "x", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pki.MemberDir(filepath.Join(c.Spec.StateDir, "pki"), "spare-a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run issued spare certificates (%v)", err)
	}
}

func mustYAML(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	b, err := (&Plan{Objects: []*unstructured.Unstructured{u}}).Print()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBuildHealingKeepsMetricsAddress: spec.etcd.metricsAddress reaches the member template, so a
// member the operator starts on a spare serves /metrics where the spec says (the template had no
// such field: the heal started it on loopback only).
func TestBuildHealingKeepsMetricsAddress(t *testing.T) {
	c := testCluster(t, true)
	withSpares(t, c, true)
	c.Spec.Etcd.MetricsAddress = v1alpha1.MetricsAddressHost
	p, err := Build(Options{Cluster: c, Image: "x", Healing: &HealingOptions{AutoReplace: true, SSHKeyFile: sshKeyFile(t, "")}})
	if err != nil {
		t.Fatal(err)
	}
	ec := etcdCluster(t, p)
	if ec.Spec.Healing == nil || ec.Spec.Healing.Member == nil || ec.Spec.Healing.Member.MetricsAddress != v1alpha1.MetricsAddressHost {
		t.Fatalf("healing %+v: want the member template's metricsAddress %q", ec.Spec.Healing, v1alpha1.MetricsAddressHost)
	}
}
