package specload

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
)

// validDoc is a valid 3-member spec whose local files (id, ssh/known_hosts, etcd, etcdctl) are
// relative to the spec's directory.
const validDoc = `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  ssh: {identityFile: id, knownHostsFile: ssh/known_hosts}
  hosts:
  - {name: a, address: 10.0.0.1, zone: z1, roles: [etcd]}
  - {name: b, address: 10.0.0.2, zone: z2, roles: [etcd]}
  - {name: c, address: 10.0.0.3, zone: z3, roles: [etcd]}
  etcd:
    version: v3.5.21
    binaries: {etcd: etcd, etcdctl: etcdctl}
`

// validCluster returns validDoc decoded (defaulted and validated), local paths under dir.
func validCluster(t *testing.T, dir string) *v1alpha1.Cluster {
	t.Helper()
	return decodeDoc(t, validDoc, dir)
}

// decodeDoc decodes a spec that must be valid, without warnings, local paths under dir.
func decodeDoc(t *testing.T, doc, dir string) *v1alpha1.Cluster {
	t.Helper()
	c, warns, err := Decode([]byte(doc), "cluster.yaml", dir)
	if err != nil || len(warns) > 0 {
		t.Fatalf("spec: %v %v", err, warns)
	}
	return c
}

// localFilesDir returns a fresh directory holding what validDoc names but the key: executable etcd
// and etcdctl, and the directory of ssh/known_hosts.
func localFilesDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"etcd", "etcdctl"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755); err != nil { // umask-proof
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// setDefaults defaults c again after a test changed it, with Decode's directories.
func setDefaults(c *v1alpha1.Cluster, dir string) { v1alpha1.SetDefaults(c, dirs(dir)) }

func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestValidateLocalFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // umask-proof
			t.Fatal(err)
		}
	}
	write("etcd", 0o755)
	write("etcdctl", 0o755)
	writeKey(t, filepath.Join(dir, "id"), "")
	if err := os.Mkdir(filepath.Join(dir, "ssh"), 0o700); err != nil {
		t.Fatal(err)
	}

	if errs := ValidateLocalFiles(validCluster(t, dir)); len(errs) > 0 {
		t.Fatalf("good files: %v", errs)
	}

	write("etcdctl", 0o644) // not executable
	write("id", 0o640)      // group-readable key
	c := validCluster(t, dir)
	c.Spec.Etcd.Binaries.Etcdutl = filepath.Join(dir, "missing")
	c.Spec.SSH.KnownHostsFile = filepath.Join(dir, "nodir", "known_hosts")
	c.Spec.Etcd.Binaries.Etcd = filepath.Join(dir, "ssh") // a directory
	errs := ValidateLocalFiles(c)
	want := []string{"spec.etcd.binaries.etcd", "spec.etcd.binaries.etcdctl", "spec.etcd.binaries.etcdutl", "spec.ssh.identityFile", "spec.ssh.knownHostsFile"}
	if got := fields(errs); !slices.Equal(got, want) {
		t.Fatalf("errors at %v, want %v\n%v", got, want, errs)
	}
	text := errs.ToAggregate().Error()
	for _, s := range []string{"not a regular file", "chmod +x " + filepath.Join(dir, "etcdctl"), "does not exist",
		"has mode 0640", "chmod 600 " + filepath.Join(dir, "id")} {
		if !strings.Contains(text, s) {
			t.Errorf("messages lack %q:\n%s", s, text)
		}
	}

	err := v1alpha1.NewValidationError("cluster.yaml", errs)
	if ve, ok := err.(*v1alpha1.ValidationError); !ok || ve.ExitCode() != 2 || !strings.HasPrefix(ve.Error(), "cluster.yaml: spec.etcd.binaries.etcd: ") {
		t.Errorf("NewValidationError: %v", err)
	}
	if v1alpha1.NewValidationError("x", nil) != nil {
		t.Error("NewValidationError(nil) != nil")
	}
}

// writeKey writes a fresh ed25519 private key in OpenSSH format (encrypted with passphrase when
// not empty) at p, mode 0600, and returns the PEM.
func writeKey(t *testing.T, p, passphrase string) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var blk *pem.Block
	if passphrase == "" {
		blk, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		blk, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(blk)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestValidateLocalFilesIdentityKey: the identity file is checked to be a usable private key before
// any host is contacted, and no message quotes key material.
func TestValidateLocalFilesIdentityKey(t *testing.T) {
	dir := localFilesDir(t)
	id := filepath.Join(dir, "id")
	good := writeKey(t, id, "")
	pub := filepath.Join(dir, "id.pub")
	if err := os.WriteFile(pub, []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5B test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(dir, "enc")
	encPEM := writeKey(t, enc, "secret")
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c := validCluster(t, dir)
	c.Spec.SSH.KnownHostsFile = filepath.Join(dir, "ssh") // a directory
	if errs := ValidateLocalFiles(c); len(errs) != 1 || errs[0].Field != "spec.ssh.knownHostsFile" {
		t.Errorf("known_hosts is a directory: errors %v, want one on spec.ssh.knownHostsFile", errs)
	}

	for _, tc := range []struct{ file, want string }{
		{id, ""},
		{pub, "is a public key"},
		{enc, ""}, // encrypted keys are fine: passphraseEnv or a prompt unlocks them
		{junk, "is not an SSH private key"},
	} {
		c := validCluster(t, dir)
		c.Spec.SSH.IdentityFile = tc.file
		errs := ValidateLocalFiles(c)
		text := errs.ToAggregate()
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected errors %v", tc.file, text)
		case tc.want != "" && (len(errs) != 1 || errs[0].Field != "spec.ssh.identityFile" || !strings.Contains(errs[0].Detail, tc.want)):
			t.Errorf("%s: errors %v, want one on spec.ssh.identityFile saying %q", tc.file, text, tc.want)
		}
		if text != nil {
			for _, secret := range [][]byte{good, encPEM} {
				line := strings.Split(string(secret), "\n")[1]
				if strings.Contains(text.Error(), line) {
					t.Errorf("%s: message quotes key material: %v", tc.file, text)
				}
			}
		}
	}
}

// TestValidateLocalFilesAccess: every key file (identityFiles, the bastion's) gets identityFile's
// checks and messages; with download set the binaries are not looked at.
func TestValidateLocalFilesAccess(t *testing.T) {
	dir := localFilesDir(t)
	writeKey(t, filepath.Join(dir, "id"), "")
	writeKey(t, filepath.Join(dir, "second"), "")
	writeKey(t, filepath.Join(dir, "loose"), "")
	if err := os.Chmod(filepath.Join(dir, "loose"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeKey(t, filepath.Join(dir, "jump"), "pass")
	kh := filepath.Join(dir, "ssh", "known_hosts")
	writeKnownHosts(t, kh, knownHostsLine(t, []string{"bastion.example.com"}))

	tests := []struct {
		name   string
		mutate func(c *v1alpha1.Cluster)
		want   []string
		detail []string // substrings of the messages
	}{
		{"identityFiles good", func(c *v1alpha1.Cluster) { c.Spec.SSH.IdentityFiles = []string{filepath.Join(dir, "second")} }, nil, nil},
		{"identityFiles missing and loose", func(c *v1alpha1.Cluster) {
			c.Spec.SSH.IdentityFiles = []string{filepath.Join(dir, "second"), filepath.Join(dir, "nope"), filepath.Join(dir, "loose")}
		}, []string{"spec.ssh.identityFiles[1]", "spec.ssh.identityFiles[2]"},
			[]string{"the SSH private key does not exist", "has mode 0644", "chmod 600 " + filepath.Join(dir, "loose")}},
		{"identityFiles directory", func(c *v1alpha1.Cluster) { c.Spec.SSH.IdentityFiles = []string{filepath.Join(dir, "ssh")} },
			[]string{"spec.ssh.identityFiles[0]"}, []string{"is not a regular file"}},
		{"agent only: no key file to check", func(c *v1alpha1.Cluster) { c.Spec.SSH.IdentityFile = "" }, nil, nil},
		{"bastion with its own encrypted key", func(c *v1alpha1.Cluster) {
			c.Spec.SSH.Bastion = &v1alpha1.Bastion{Address: "bastion.example.com", IdentityFile: filepath.Join(dir, "jump")}
		}, nil, nil},
		{"bastion key loose", func(c *v1alpha1.Cluster) {
			c.Spec.SSH.Bastion = &v1alpha1.Bastion{Address: "bastion.example.com", IdentityFile: filepath.Join(dir, "loose")}
		}, []string{"spec.ssh.bastion.identityFile"}, []string{"has mode 0644"}},
		{"bastion key missing", func(c *v1alpha1.Cluster) {
			c.Spec.SSH.Bastion = &v1alpha1.Bastion{Address: "bastion.example.com", IdentityFile: filepath.Join(dir, "nope")}
		}, []string{"spec.ssh.bastion.identityFile"}, []string{"does not exist"}},
		{"download: binaries not checked", func(c *v1alpha1.Cluster) {
			c.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{Etcd: filepath.Join(dir, "missing")}
			c.Spec.Etcd.Download = &v1alpha1.EtcdDownload{URL: "https://m.example/e.tgz", SHA256: strings.Repeat("a", 64)}
		}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(t, dir)
			tc.mutate(c)
			setDefaults(c, dir)
			errs := ValidateLocalFiles(c)
			if got := fields(errs); !slices.Equal(got, tc.want) {
				t.Fatalf("errors at %v, want %v\n%v", got, tc.want, errs)
			}
			text := errs.ToAggregate()
			for _, d := range tc.detail {
				if !strings.Contains(text.Error(), d) {
					t.Errorf("messages lack %q:\n%v", d, text)
				}
			}
		})
	}
}

// knownHostsLine returns a known_hosts line for a fresh ed25519 key of hosts (addresses as
// knownhosts.Normalize writes them: "[host]:port" unless the port is 22).
func knownHostsLine(t *testing.T, hosts []string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return knownhosts.Line(hosts, key)
}

func writeKnownHosts(t *testing.T, p string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBastionKnownHosts: the bastion's known_hosts file must exist and hold an entry for its
// address:port, checked with real files before any host is contacted.
func TestBastionKnownHosts(t *testing.T) {
	dir := localFilesDir(t)
	writeKey(t, filepath.Join(dir, "id"), "")
	hashed := knownhosts.HashHostname("203.0.113.10")
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewPublicKey(pub)
	hashedLine := hashed + " " + string(ssh.MarshalAuthorizedKey(key))

	tests := []struct {
		name    string
		address string
		port    int
		lines   []string // known_hosts content; nil = no file
		missing bool     // want the "bastion without a known_hosts entry" error
	}{
		{"name on port 22", "bastion.example.com", 22, []string{knownHostsLine(t, []string{"bastion.example.com"})}, false},
		{"IP among others", "203.0.113.10", 22, []string{
			"# comment", knownHostsLine(t, []string{"10.0.0.1"}), knownHostsLine(t, []string{"jump", "203.0.113.10"})}, false},
		{"IPv6", "2001:db8::10", 22, []string{knownHostsLine(t, []string{"2001:db8::10"})}, false},
		{"other port", "203.0.113.10", 2222, []string{knownHostsLine(t, []string{knownhosts.Normalize("203.0.113.10:2222")})}, false},
		{"IPv6 other port", "2001:db8::10", 2222, []string{knownHostsLine(t, []string{knownhosts.Normalize("[2001:db8::10]:2222")})}, false},
		{"hashed", "203.0.113.10", 22, []string{hashedLine}, false},
		{"wildcard", "bastion.example.com", 22, []string{knownHostsLine(t, []string{"*.example.com"})}, false},
		{"no entry", "bastion.example.com", 22, []string{knownHostsLine(t, []string{"cp-a.example.com", "10.0.0.1"})}, true},
		{"entry for port 22 only", "203.0.113.10", 2222, []string{knownHostsLine(t, []string{"203.0.113.10"})}, true},
		{"empty file", "203.0.113.10", 22, []string{}, true},
		{"no file", "203.0.113.10", 22, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kh := filepath.Join(t.TempDir(), "bastion known_hosts") // a space: the hint quotes it
			if tc.lines != nil {
				writeKnownHosts(t, kh, tc.lines...)
			}
			c := validCluster(t, dir)
			c.Spec.SSH.Bastion = &v1alpha1.Bastion{Address: tc.address, Port: tc.port, KnownHostsFile: kh}
			setDefaults(c, dir)
			errs := ValidateLocalFiles(c)
			if !tc.missing {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != "spec.ssh.bastion.knownHostsFile" {
				t.Fatalf("errors %v, want one on spec.ssh.bastion.knownHostsFile", errs)
			}
			msg := errs[0].Error()
			for _, want := range []string{"bastion without a known_hosts entry", kh,
				fmt.Sprintf("ssh-keyscan -p %d %s >> '%s'", tc.port, tc.address, kh), "not even with --accept-new-host-keys"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q:\n%s", want, msg)
				}
			}
		})
	}

	// Defaulted from spec.ssh.knownHostsFile; the error line falls back to spec.ssh.bastion's.
	doc := `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: x}
spec:
  ssh:
    identityFile: id
    knownHostsFile: ssh/known_hosts
    bastion:
      address: 198.51.100.7
  hosts:
  - {name: a, address: 10.0.0.1, zone: z, roles: [etcd]}
  etcd:
    version: v3.6.16
    binaries: {etcd: etcd}
`
	writeKnownHosts(t, filepath.Join(dir, "ssh", "known_hosts"), knownHostsLine(t, []string{"10.0.0.1"}))
	c, _, err := Decode([]byte(doc), "c.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	err = c.ValidationError("c.yaml", ValidateLocalFiles(c))
	want := "c.yaml:8: spec.ssh.bastion.knownHostsFile: Invalid value: \"" + filepath.Join(dir, "ssh", "known_hosts") + "\": bastion without a known_hosts entry: the file has no host key for 198.51.100.7"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant it to contain %s", err, want)
	}
	var ve *v1alpha1.ValidationError
	if !errors.As(err, &ve) || ve.ExitCode() != 2 {
		t.Errorf("err %T, want a *ValidationError (exit 2)", err)
	}
}

// TestValidateEnvironment: variables the spec names must be set, and some way to authenticate must
// exist; messages name the variables, never their values.
func TestValidateEnvironment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *v1alpha1.Cluster)
		env    map[string]string
		want   []string
		detail []string
	}{
		{"nothing named", func(c *v1alpha1.Cluster) {}, nil, nil, nil},
		{"both set", func(c *v1alpha1.Cluster) {
			c.Spec.SSH.User = "deploy"
			c.Spec.SSH.PassphraseEnv, c.Spec.SSH.Sudo.PasswordEnv = "KEY_PASS", "SUDO_PASS"
		}, map[string]string{"KEY_PASS": "k-secret", "SUDO_PASS": "s-secret"}, nil, nil},
		{"sudo password unset", func(c *v1alpha1.Cluster) {
			c.Spec.SSH.User = "deploy"
			c.Spec.SSH.Sudo.PasswordEnv = "HACTL_SUDO_PASSWORD"
		}, map[string]string{"SUDO_PASS": "x"}, []string{"spec.ssh.sudo.passwordEnv"},
			[]string{`spec.ssh.sudo.passwordEnv: Invalid value: "HACTL_SUDO_PASSWORD": names the environment variable HACTL_SUDO_PASSWORD, which is not set (or is empty): export HACTL_SUDO_PASSWORD=... before running hactl, or remove the field to be prompted for the sudo password`}},
		{"passphrase empty", func(c *v1alpha1.Cluster) { c.Spec.SSH.PassphraseEnv = "KEY_PASS" }, map[string]string{"KEY_PASS": ""},
			[]string{"spec.ssh.passphraseEnv"}, []string{"export KEY_PASS=... before running hactl, or remove the field to be prompted for the key passphrase"}},
		{"both unset", func(c *v1alpha1.Cluster) { c.Spec.SSH.PassphraseEnv, c.Spec.SSH.Sudo.PasswordEnv = "A", "B" }, nil,
			[]string{"spec.ssh.passphraseEnv", "spec.ssh.sudo.passwordEnv"}, nil},
		{"agent required, no socket", func(c *v1alpha1.Cluster) { c.Spec.SSH.Agent = v1alpha1.AgentRequired }, nil,
			[]string{"spec.ssh.agent"}, []string{"the agent is required but SSH_AUTH_SOCK is not set", "ssh-add"}},
		{"agent required, socket", func(c *v1alpha1.Cluster) { c.Spec.SSH.Agent = v1alpha1.AgentRequired }, map[string]string{"SSH_AUTH_SOCK": "/tmp/agent.sock"}, nil, nil},
		{"agent only, no socket", func(c *v1alpha1.Cluster) { c.Spec.SSH.IdentityFile = "" }, nil,
			[]string{"spec.ssh.agent"}, []string{"no key file is set (identityFile, identityFiles) and SSH_AUTH_SOCK is not set"}},
		{"agent only, socket", func(c *v1alpha1.Cluster) { c.Spec.SSH.IdentityFile = "" }, map[string]string{"SSH_AUTH_SOCK": "/tmp/agent.sock"}, nil, nil},
		{"identityFiles, no socket", func(c *v1alpha1.Cluster) {
			c.Spec.SSH.IdentityFile, c.Spec.SSH.IdentityFiles = "", []string{"/k/a"}
		}, nil, nil, nil},
		{"agent never, no socket", func(c *v1alpha1.Cluster) { c.Spec.SSH.Agent = v1alpha1.AgentNever }, nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(t, "/specs")
			tc.mutate(c)
			var asked []string
			getenv := func(k string) string { asked = append(asked, k); return tc.env[k] }
			errs := ValidateEnvironment(c, getenv)
			if got := fields(errs); !slices.Equal(got, tc.want) {
				t.Fatalf("errors at %v, want %v\n%v", got, tc.want, errs)
			}
			text := ""
			if agg := errs.ToAggregate(); agg != nil {
				text = agg.Error()
			}
			for _, d := range tc.detail {
				if !strings.Contains(text, d) {
					t.Errorf("messages lack %q:\n%s", d, text)
				}
			}
			for _, v := range tc.env {
				if v != "" && v != "x" && strings.Contains(text, v) {
					t.Errorf("message quotes the value %q:\n%s", v, text)
				}
			}
			for _, k := range asked {
				if k != c.Spec.SSH.PassphraseEnv && k != c.Spec.SSH.Sudo.PasswordEnv && k != "SSH_AUTH_SOCK" {
					t.Errorf("looked up %q, which the spec does not name", k)
				}
			}
		})
	}
}
