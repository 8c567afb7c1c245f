//go:build e2e

// Package access runs the real hactl binary against the lab in the access modes of issue 3: a
// non-root user with sudo (with and without a password), ssh-agent authentication, hosts reachable
// only through a bastion, an IPv6-only network, and etcd installed from a release URL. One lab
// (3 members + bastion + internal hosts + IPv6 hosts + mirror) for the package, always torn down.
package access

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/access:", err)
		os.Exit(1)
	}
	os.Exit(harness.Main(m, "e2e/access", lab.Options{Members: 3, Bastion: true, IPv6: true, Mirror: true,
		Dir: filepath.Join(root, ".lab-e2e-access")}, &suite))
}

type result struct {
	stdout, stderr string
	code           int
}

// hactl runs the real binary with extra environment variables and logs the command and its output.
func hactl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := harness.Run(t, suite.Bin, env, args...)
	return result{stdout: r.Stdout, stderr: r.Stderr, code: r.Code}
}

func mustHactl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := hactl(t, env, args...)
	if r.code != 0 {
		t.Fatalf("hactl %s: exit %d, want 0", strings.Join(args, " "), r.code)
	}
	return r
}

func bootstrapJSON(t *testing.T, env []string, spec string) report.Cluster {
	t.Helper()
	r := mustHactl(t, env, "bootstrap", "-f", spec, "-o", "json")
	var res report.Cluster
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("bootstrap -o json: %v", err)
	}
	return res
}

// healthy polls `hactl status -o json` until the cluster is healthy and returns the report.
func healthy(t *testing.T, env []string, spec string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := hactl(t, env, "status", "-f", spec, "-o", "json")
		var rep map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rep); err == nil && r.code == 0 && rep["healthy"] == true {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster of %s not healthy within 60s", spec)
		}
		time.Sleep(2 * time.Second)
	}
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
	raw, err := lab.MarshalSpec(c)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func execOn(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := suite.Lab.Exec(context.Background(), host, args...)
	if err != nil {
		t.Fatalf("on %s: %v\n%s", host, err, out)
	}
	return out
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
	res := bootstrapJSON(t, nil, spec)
	for _, m := range res.Members {
		if m.Action != report.ActionCreate {
			t.Errorf("%s: %s", m.Name, m.Action)
		}
	}
	healthy(t, nil, spec)
	for _, h := range cpHosts {
		if got := strings.TrimSpace(execOn(t, h, "stat", "-c", "%a %U", "/etc/etcd/pki/ca.key")); got != "600 root" {
			t.Errorf("%s: ca.key %q, want 600 root (written through sudo)", h, got)
		}
	}
	for _, m := range bootstrapJSON(t, nil, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: re-run %s", m.Name, m.Action)
		}
	}
}

func TestSudoWithPasswordFromEnvironment(t *testing.T) {
	freshCP(t)
	spec := variantSpec(t, lab.VariantSudoPassword, nil)
	// The variable the spec names is unset: refused locally (exit 2) before any host is contacted.
	r := hactl(t, []string{lab.SudoPasswordEnv + "="}, "plan", "-f", spec)
	if r.code != 2 || !strings.Contains(r.stderr, "spec.ssh.sudo.passwordEnv") || strings.Contains(r.stdout, "[preflight]") {
		t.Fatalf("unset sudo password variable: want exit 2 naming spec.ssh.sudo.passwordEnv before preflight")
	}
	pw := suite.Lab.SudoPassword()
	env := []string{lab.SudoPasswordEnv + "=" + pw}
	logFile := filepath.Join(t.TempDir(), "debug.log")
	cmd := exec.Command(suite.Bin, "bootstrap", "-f", spec, "-v", "--log-file", logFile)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("$ %s=*** %s bootstrap -f %s -v\n%s", lab.SudoPasswordEnv, suite.Bin, spec, out)
	if err != nil {
		t.Fatalf("bootstrap through sudo with a password: %v", err)
	}
	logged, _ := os.ReadFile(logFile)
	if bytes.Contains(out, []byte(pw)) || bytes.Contains(logged, []byte(pw)) {
		t.Fatalf("the sudo password appears in hactl's output or debug log")
	}
	healthy(t, env, spec)
	// A wrong password is a clear error, not a hang.
	r = hactl(t, []string{lab.SudoPasswordEnv + "=wrong-" + pw}, "plan", "-f", spec)
	if r.code != 1 || !strings.Contains(strings.ToLower(r.stderr), "sudo") || strings.Contains(r.stderr, pw) {
		t.Fatalf("wrong sudo password: want exit 1 about sudo without the password")
	}
}

// TestAgentAuthentication serves the lab key from an in-process ssh-agent and removes the key file
// from the spec: hactl authenticates through SSH_AUTH_SOCK only.
func TestAgentAuthentication(t *testing.T) {
	freshCP(t)
	keyPEM, err := os.ReadFile(filepath.Join(suite.Lab.Dir(), "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
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
	r := hactl(t, []string{"SSH_AUTH_SOCK="}, "plan", "-f", spec)
	if r.code != 2 || !strings.Contains(r.stderr, "SSH_AUTH_SOCK") {
		t.Fatalf("agent required without SSH_AUTH_SOCK: want exit 2 naming SSH_AUTH_SOCK")
	}
	env := []string{"SSH_AUTH_SOCK=" + sock}
	bootstrapJSON(t, env, spec)
	healthy(t, env, spec)
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
	res := bootstrapJSON(t, nil, spec)
	if len(res.Members) != 3 {
		t.Fatalf("members %+v", res.Members)
	}
	rep := healthy(t, nil, spec) // status also goes through the bastion
	t.Logf("status through the bastion: healthy=%v", rep["healthy"])
	if r := mustHactl(t, nil, "pki", "check", "-f", spec); !strings.Contains(r.stdout, "in-a") {
		t.Errorf("pki check does not list in-a")
	}
}

func TestIPv6OnlyCluster(t *testing.T) {
	spec := variantSpec(t, lab.VariantIPv6, nil)
	bootstrapJSON(t, nil, spec)
	rep := healthy(t, nil, spec)
	raw, _ := json.Marshal(rep)
	if !strings.Contains(string(raw), "https://[fd00:db8:28::") {
		t.Fatalf("status does not show bracketed IPv6 URLs: %s", raw)
	}
	if strings.Contains(string(raw), "172.30.") {
		t.Fatalf("an IPv4 address of the v6 hosts leaked into the cluster: %s", raw)
	}
	r := mustHactl(t, nil, "pki", "check", "-f", spec, "-o", "json")
	if !strings.Contains(r.stdout, "fd00:db8:28::11") {
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
	r := hactl(t, nil, "bootstrap", "-f", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "sha256") {
		t.Fatalf("wrong sha256: want exit 1 naming the sha256 mismatch")
	}
	for _, h := range cpHosts {
		if out := execOn(t, h, "sh", "-c", "ls /usr/local/bin/etcd /etc/etcd /etc/systemd/system/etcd.service 2>/dev/null | wc -l"); strings.TrimSpace(out) != "0" {
			t.Errorf("%s: something was installed despite the wrong sha256", h)
		}
	}
	// A URL without a sha256 is refused locally.
	nosum := variantSpec(t, lab.VariantDownload, func(c *v1alpha1.Cluster) { c.Spec.Etcd.Download.SHA256 = "" })
	if r := hactl(t, nil, "plan", "-f", nosum); r.code != 2 || !strings.Contains(r.stderr, "spec.etcd.download.sha256") {
		t.Fatalf("URL without sha256: want exit 2")
	}
	good := variantSpec(t, lab.VariantDownload, nil)
	bootstrapJSON(t, nil, good)
	healthy(t, nil, good)
	if v := execOn(t, "cp-a", "/usr/local/bin/etcd", "--version"); !strings.Contains(v, "3.6.16") {
		t.Fatalf("installed etcd: %s", v)
	}
	for _, m := range bootstrapJSON(t, nil, good).Members {
		if m.Action != report.ActionUnchanged || len(m.Changes) != 0 {
			t.Errorf("%s: re-run %s %v (downloaded again?)", m.Name, m.Action, m.Changes)
		}
	}
}

// TestPassphraseProtectedKey: the lab key re-encrypted with a passphrase; the passphrase comes from
// the environment variable the spec names (never the spec, never argv).
func TestPassphraseProtectedKey(t *testing.T) {
	freshCP(t)
	keyPEM, err := os.ReadFile(filepath.Join(suite.Lab.Dir(), "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
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
	r := hactl(t, []string{"HACTL_E2E_KEY_PASSPHRASE=wrong"}, "plan", "-f", spec)
	if r.code != 1 || strings.Contains(r.stderr, passphrase) || !strings.Contains(r.stderr, encrypted) {
		t.Fatalf("wrong passphrase: want exit 1 naming the key file")
	}
	mustHactl(t, []string{"HACTL_E2E_KEY_PASSPHRASE=" + passphrase}, "plan", "-f", spec)
}
