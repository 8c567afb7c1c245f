//go:build e2e

// Package access runs the real hactl binary against the lab in the access modes of issue 3: a
// non-root user with sudo (with and without a password), ssh-agent authentication, hosts reachable
// only through a bastion, an IPv6-only network, and etcd installed from a release URL. One lab
// (3 members + bastion + internal hosts + IPv6 hosts + mirror) for the package, always torn down.
package access

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/report"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/access", lab.Options{Members: 3, Bastion: true, IPv6: true, Mirror: true,
		Dir: ".lab-e2e-access"}, &suite))
}

// healthy polls `hactl status -o json` (run by h: the suite with the environment the spec needs)
// until the cluster is healthy and returns the report.
func healthy(t *testing.T, h *harness.Suite, spec string) map[string]any {
	t.Helper()
	var rep map[string]any
	harness.WaitFor(t, "cluster of "+spec+" healthy", 60*time.Second, 2*time.Second, func() string {
		r := h.Hactl(t, "status", "-f", spec, "-o", "json")
		rep = nil
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err == nil && r.Code == 0 && rep["healthy"] == true {
			return ""
		}
		return fmt.Sprintf("exit %d", r.Code)
	})
	return rep
}

func variantSpec(t *testing.T, v lab.Variant, mutate func(c *v1alpha1.Cluster)) string {
	t.Helper()
	var dl *v1alpha1.EtcdDownload
	if v == lab.VariantDownload {
		tb, err := suite.Lab.EtcdTarball()
		if err != nil {
			t.Fatal(err)
		}
		dl = tb.Download(tb.URL)
	}
	c, err := lab.BuildVariantSpec(v, suite.Lab.Dir(), filepath.Join(suite.RepoRoot, "bin"), dl)
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.StateDir = filepath.Join(t.TempDir(), "state")
	if mutate != nil {
		mutate(c)
	}
	return harness.WriteSpec(t, c, "cluster.yaml")
}

// labKey returns the lab's private SSH key, parsed.
func labKey(t *testing.T) any {
	t.Helper()
	keyPEM, err := os.ReadFile(suite.Lab.IdentityFile())
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

var cpHosts = []string{"cp-a", "cp-b", "cp-c"}

func freshCP(t *testing.T) {
	t.Helper()
	if err := suite.Lab.Recreate(context.Background(), cpHosts...); err != nil {
		t.Fatal(err)
	}
}

func TestNonRootUserWithPasswordlessSudo(t *testing.T) {
	freshCP(t)
	spec := variantSpec(t, lab.VariantSudo, nil)
	res := suite.BootstrapJSON(t, spec)
	for _, m := range res.Members {
		if m.Action != report.ActionCreate {
			t.Errorf("%s: %s", m.Name, m.Action)
		}
	}
	healthy(t, &suite, spec)
	for _, h := range cpHosts {
		if got := strings.TrimSpace(suite.ExecOn(t, h, "stat", "-c", "%a %U", "/etc/etcd/pki/ca.key")); got != "600 root" {
			t.Errorf("%s: ca.key %q, want 600 root (written through sudo)", h, got)
		}
	}
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: re-run %s", m.Name, m.Action)
		}
	}
}

func TestSudoWithPasswordFromEnvironment(t *testing.T) {
	freshCP(t)
	spec := variantSpec(t, lab.VariantSudoPassword, nil)
	// The variable the spec names is unset: refused locally (exit 2) before any host is contacted.
	r := suite.WithEnv(lab.SudoPasswordEnv+"=").Hactl(t, "plan", "-f", spec)
	if r.Code != 2 || !strings.Contains(r.Stderr, "spec.ssh.sudo.passwordEnv") || strings.Contains(r.Stdout, "[preflight]") {
		t.Fatalf("unset sudo password variable: want exit 2 naming spec.ssh.sudo.passwordEnv before preflight")
	}
	pw := suite.Lab.SudoPassword()
	withPassword := suite.WithSecretEnv(lab.SudoPasswordEnv + "=" + pw)
	r = withPassword.Hactl(t, "bootstrap", "-f", spec, "-v")
	if r.Code != 0 {
		t.Fatalf("bootstrap through sudo with a password: exit %d", r.Code)
	}
	logged, err := os.ReadFile(r.LogFile)
	if err != nil || len(logged) == 0 {
		t.Fatalf("the debug log the password is looked for in: %v (%d bytes)", err, len(logged))
	}
	if strings.Contains(r.Stdout, pw) || strings.Contains(r.Stderr, pw) || bytes.Contains(logged, []byte(pw)) {
		t.Fatalf("the sudo password appears in hactl's output or debug log")
	}
	healthy(t, withPassword, spec)
	// A wrong password is a clear error, not a hang.
	r = suite.WithSecretEnv(lab.SudoPasswordEnv+"=wrong-"+pw).Hactl(t, "plan", "-f", spec)
	if r.Code != 1 || !strings.Contains(strings.ToLower(r.Stderr), "sudo") || strings.Contains(r.Stderr, pw) {
		t.Fatalf("wrong sudo password: want exit 1 about sudo without the password")
	}
}

// TestAgentAuthentication serves the lab key from an in-process ssh-agent and removes the key file
// from the spec: hactl authenticates through SSH_AUTH_SOCK only.
func TestAgentAuthentication(t *testing.T) {
	freshCP(t)
	key := labKey(t)
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: key, Comment: "lab"}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _ = agent.ServeAgent(kr, c) }()
		}
	}()
	spec := variantSpec(t, lab.VariantSudo, func(c *v1alpha1.Cluster) {
		c.Spec.SSH.IdentityFile = ""
		c.Spec.SSH.Agent = v1alpha1.AgentRequired
	})
	r := suite.WithEnv("SSH_AUTH_SOCK=").Hactl(t, "plan", "-f", spec)
	if r.Code != 2 || !strings.Contains(r.Stderr, "SSH_AUTH_SOCK") {
		t.Fatalf("agent required without SSH_AUTH_SOCK: want exit 2 naming SSH_AUTH_SOCK")
	}
	withAgent := suite.WithEnv("SSH_AUTH_SOCK=" + sock)
	withAgent.BootstrapJSON(t, spec)
	healthy(t, withAgent, spec)
}

// TestBastion: in-a/b/c sit on an internal network this machine cannot reach; hactl reaches them
// (SSH and the etcd client) through the bastion only.
func TestBastion(t *testing.T) {
	spec := variantSpec(t, lab.VariantBastion, nil)
	in, err := suite.Lab.Host("in-a")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(in.Address, "22"), 2*time.Second); err == nil {
		c.Close()
		t.Fatalf("in-a is reachable directly: the bastion test would prove nothing")
	}
	res := suite.BootstrapJSON(t, spec)
	if len(res.Members) != 3 {
		t.Fatalf("members %+v", res.Members)
	}
	rep := healthy(t, &suite, spec) // status also goes through the bastion
	t.Logf("status through the bastion: healthy=%v", rep["healthy"])
	if r := suite.MustHactl(t, "pki", "check", "-f", spec); !strings.Contains(r.Stdout, "in-a") {
		t.Errorf("pki check does not list in-a")
	}
}

func TestIPv6OnlyCluster(t *testing.T) {
	spec := variantSpec(t, lab.VariantIPv6, func(c *v1alpha1.Cluster) { c.Spec.Etcd.MetricsAddress = v1alpha1.MetricsAddressHost })
	suite.BootstrapJSON(t, spec)
	// spec.etcd.metricsAddress "host": a scraper elsewhere reads each member's metrics on its own
	// (bracketed IPv6) address.
	for _, h := range []string{"v6-a", "v6-b", "v6-c"} {
		host, err := suite.Lab.Host(h)
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + net.JoinHostPort(host.Address, "2381") + "/metrics"
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("etcd_server_has_leader 1")) {
			t.Fatalf("%s: %d, no etcd_server_has_leader 1", url, resp.StatusCode)
		}
	}
	rep := healthy(t, &suite, spec)
	raw, _ := json.Marshal(rep)
	if !strings.Contains(string(raw), "https://[fd00:db8:28::") {
		t.Fatalf("status does not show bracketed IPv6 URLs: %s", raw)
	}
	if strings.Contains(string(raw), "172.30.") {
		t.Fatalf("an IPv4 address of the v6 hosts leaked into the cluster: %s", raw)
	}
	r := suite.MustHactl(t, "pki", "check", "-f", spec, "-o", "json")
	if !strings.Contains(r.Stdout, "fd00:db8:28::11") {
		t.Fatalf("certificates lack the IPv6 SAN")
	}
}

func TestInstallFromURL(t *testing.T) {
	freshCP(t)
	// A wrong sha256 is refused on every host before anything is installed.
	bad := variantSpec(t, lab.VariantDownload, func(c *v1alpha1.Cluster) {
		s := []byte(c.Spec.Etcd.Download.SHA256)
		if s[0] == '0' {
			s[0] = '1'
		} else {
			s[0] = '0'
		}
		c.Spec.Etcd.Download.SHA256 = string(s)
	})
	r := suite.Hactl(t, "bootstrap", "-f", bad)
	if r.Code != 1 || !strings.Contains(r.Stderr, "sha256") {
		t.Fatalf("wrong sha256: want exit 1 naming the sha256 mismatch")
	}
	for _, h := range cpHosts {
		if out := suite.ExecOn(t, h, "sh", "-c", "ls /usr/local/bin/etcd /etc/etcd /etc/systemd/system/etcd.service 2>/dev/null | wc -l"); strings.TrimSpace(out) != "0" {
			t.Errorf("%s: something was installed despite the wrong sha256", h)
		}
	}
	// A URL without a sha256 is refused locally.
	nosum := variantSpec(t, lab.VariantDownload, func(c *v1alpha1.Cluster) { c.Spec.Etcd.Download.SHA256 = "" })
	if r := suite.Hactl(t, "plan", "-f", nosum); r.Code != 2 || !strings.Contains(r.Stderr, "spec.etcd.download.sha256") {
		t.Fatalf("URL without sha256: want exit 2")
	}
	good := variantSpec(t, lab.VariantDownload, nil)
	suite.BootstrapJSON(t, good)
	healthy(t, &suite, good)
	if v := suite.ExecOn(t, "cp-a", "/usr/local/bin/etcd", "--version"); !strings.Contains(v, "3.6.16") {
		t.Fatalf("installed etcd: %s", v)
	}
	for _, m := range suite.BootstrapJSON(t, good).Members {
		if m.Action != report.ActionUnchanged || len(m.Changes) != 0 {
			t.Errorf("%s: re-run %s %v (downloaded again?)", m.Name, m.Action, m.Changes)
		}
	}
}

// TestPassphraseProtectedKey: the lab key re-encrypted with a passphrase; the passphrase comes from
// the environment variable the spec names (never the spec, never argv).
func TestPassphraseProtectedKey(t *testing.T) {
	freshCP(t)
	key := labKey(t)
	const passphrase = "correct horse battery staple"
	block, err := ssh.MarshalPrivateKeyWithPassphrase(key, "lab", []byte(passphrase))
	if err != nil {
		t.Fatal(err)
	}
	encrypted := filepath.Join(t.TempDir(), "id_encrypted")
	if err := os.WriteFile(encrypted, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := variantSpec(t, lab.VariantSudo, func(c *v1alpha1.Cluster) {
		c.Spec.SSH.IdentityFile = encrypted
		c.Spec.SSH.Agent = v1alpha1.AgentNever
		c.Spec.SSH.PassphraseEnv = "HACTL_E2E_KEY_PASSPHRASE"
	})
	r := suite.WithEnv("HACTL_E2E_KEY_PASSPHRASE=wrong").Hactl(t, "plan", "-f", spec)
	if r.Code != 1 || strings.Contains(r.Stderr, passphrase) || !strings.Contains(r.Stderr, encrypted) {
		t.Fatalf("wrong passphrase: want exit 1 naming the key file")
	}
	suite.WithEnv("HACTL_E2E_KEY_PASSPHRASE="+passphrase).MustHactl(t, "plan", "-f", spec)
}

// TestPerHostSSH: hosts[*].ssh overrides. spec.ssh's own key is authorized nowhere and the agent is
// off, so only the per-host keys can log in: cp-a as root with the lab key, cp-b and cp-c as the
// sudo user with a copy of it (cp-c's port given twice, equal). sshd's journal shows who logged in.
func TestPerHostSSH(t *testing.T) {
	freshCP(t)
	dir := t.TempDir()
	_, stranger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(stranger, "authorized nowhere")
	if err != nil {
		t.Fatal(err)
	}
	strangerFile := filepath.Join(dir, "id_stranger")
	labCopy := filepath.Join(dir, "id_lab_copy")
	labPEM, err := os.ReadFile(suite.Lab.IdentityFile())
	if err != nil {
		t.Fatal(err)
	}
	for f, b := range map[string][]byte{strangerFile: pem.EncodeToMemory(block), labCopy: labPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	perHost := func(cpcPort int) func(c *v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) {
			c.Spec.SSH.IdentityFile = strangerFile
			c.Spec.SSH.Agent = v1alpha1.AgentNever
			for i := range c.Spec.Hosts {
				h := &c.Spec.Hosts[i]
				switch h.Name {
				case "cp-a":
					h.SSH = &v1alpha1.HostSSH{User: "root", IdentityFile: suite.Lab.IdentityFile()}
				case "cp-b":
					h.SSH = &v1alpha1.HostSSH{IdentityFile: labCopy}
				case "cp-c":
					h.Port = 22 // given twice: hosts[*].port and hosts[*].ssh.port
					h.SSH = &v1alpha1.HostSSH{IdentityFile: labCopy, Port: cpcPort}
				}
			}
		}
	}
	// Two different ports for one host: refused locally, naming the field.
	if r := suite.Hactl(t, "plan", "-f", variantSpec(t, lab.VariantSudo, perHost(2222))); r.Code != 2 || !strings.Contains(r.Stderr, "spec.hosts[2].ssh.port") {
		t.Fatalf("hosts[2].port 22 and hosts[2].ssh.port 2222: want exit 2 naming spec.hosts[2].ssh.port")
	}
	spec := variantSpec(t, lab.VariantSudo, perHost(22))
	suite.BootstrapJSON(t, spec)
	healthy(t, &suite, spec)
	logins := func(host, user string) int {
		out := suite.ExecOn(t, host, "sh", "-c", "journalctl -u ssh --no-pager -o cat | grep -c 'Accepted publickey for "+user+" ' || true")
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	if logins("cp-a", lab.SudoUser) != 0 {
		t.Errorf("cp-a: hactl logged in as %s, want root (hosts[0].ssh.user)", lab.SudoUser)
	}
	for _, h := range []string{"cp-b", "cp-c"} {
		if logins(h, lab.SudoUser) == 0 {
			t.Errorf("%s: no login as %s (spec.ssh.user with hosts[*].ssh.identityFile)", h, lab.SudoUser)
		}
	}
}
