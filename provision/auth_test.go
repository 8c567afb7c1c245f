package provision_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/provision/internal/sshtest"
	"golang.org/x/crypto/ssh"
)

func fp(k sshtest.Key) string { return ssh.FingerprintSHA256(k.Public()) }

// writeFile writes content with mode 0600 and returns the path.
func writeFile(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fixturePassphrase is the passphrase of testdata/id_ed25519_encrypted (made
// with ssh-keygen -a 1: one KDF round keeps the tests fast).
const fixturePassphrase = "correct horse"

// encryptedKey copies the encrypted fixture key into dir (mode 0600) and
// returns its path and public key.
func encryptedKey(t *testing.T, dir string) (string, ssh.PublicKey) {
	t.Helper()
	priv, err := os.ReadFile("testdata/id_ed25519_encrypted")
	if err != nil {
		t.Fatal(err)
	}
	pubText, err := os.ReadFile("testdata/id_ed25519_encrypted.pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(pubText)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "id_enc", priv), pub
}

func TestDialAgent(t *testing.T) {
	e := newEnv(t)
	e.trust()
	other := sshtest.NewKey(t)
	sock := sshtest.NewAgent(t, e.key)

	cfg := e.config()
	cfg.IdentityFile = other.WriteKeyFile(t, e.dir, "other", 0o600) // wrong, and offered after the agent's
	cfg.AgentSocket = sock
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := e.srv.Offered(); !slices.Equal(got, []string{fp(e.key)}) {
		t.Errorf("offered %v, want only the agent's key %s", got, fp(e.key))
	}

	// No key file at all: the agent alone.
	cfg.IdentityFile = ""
	cfg.Agent = provision.AgentRequired
	c, err = provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestDialAgentFromEnvironment(t *testing.T) {
	e := newEnv(t)
	e.trust()
	t.Setenv("SSH_AUTH_SOCK", sshtest.NewAgent(t, e.key))
	cfg := e.config()
	cfg.IdentityFile = ""
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	// "never" ignores it.
	cfg.Agent = provision.AgentNever
	cfg.IdentityFile = sshtest.NewKey(t).WriteKeyFile(t, e.dir, "other", 0o600)
	_, err = provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	var ae *provision.AuthError
	if !errors.As(err, &ae) || strings.Contains(err.Error(), "agent") {
		t.Errorf("err = %v, want an *AuthError not mentioning the agent", err)
	}
}

func TestDialAgentRequired(t *testing.T) {
	e := newEnv(t)
	e.trust()
	for name, sock := range map[string]string{
		"no socket":   "",
		"dead socket": filepath.Join(t.TempDir(), "nothing.sock"),
	} {
		cfg := e.config()
		cfg.Agent = provision.AgentRequired
		cfg.AgentSocket = sock
		_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
		if !errors.Is(err, provision.ErrNoAgent) {
			t.Errorf("%s: err = %v, want ErrNoAgent", name, err)
		}
	}
	if e.srv.Conns() != 0 {
		t.Error("connected although the required agent is missing")
	}
}

func TestDialAgentUnreachableAuto(t *testing.T) {
	e := newEnv(t)
	e.trust()
	cfg := e.config()
	cfg.AgentSocket = filepath.Join(t.TempDir(), "nothing.sock")
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg) // the key file works
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	cfg.IdentityFile = sshtest.NewKey(t).WriteKeyFile(t, e.dir, "other", 0o600)
	_, err = provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err == nil || !strings.Contains(err.Error(), "tried agent (not reachable: agent "+cfg.AgentSocket) {
		t.Errorf("err = %v, want the unreachable agent listed", err)
	}
}

func TestDialKeysInOrder(t *testing.T) {
	e := newEnv(t)
	e.trust()
	wrong := sshtest.NewKey(t)
	cfg := e.config()
	cfg.IdentityFile = wrong.WriteKeyFile(t, e.dir, "wrong", 0o600)
	cfg.IdentityFiles = []string{e.keyFile}
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got, want := e.srv.Offered(), []string{fp(wrong), fp(e.key)}; !slices.Equal(got, want) {
		t.Errorf("offered %v, want %v", got, want)
	}
}

func TestDialEncryptedKey(t *testing.T) {
	dir := t.TempDir()
	encrypted, pub := encryptedKey(t, dir)
	e := newEnv(t, sshtest.Authorize(pub))
	e.trust()
	const pass = fixturePassphrase

	var calls atomic.Int32
	cfg := e.config()
	cfg.IdentityFile = encrypted
	cfg.Passphrase = func(file string) ([]byte, error) {
		calls.Add(1)
		if file != encrypted {
			t.Errorf("Passphrase(%q), want %q", file, encrypted)
		}
		return []byte(pass), nil
	}
	d, err := provision.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if calls.Load() != 0 {
		t.Error("passphrase asked before it was needed")
	}
	for range 3 {
		c, err := d.Dial(ctxTimeout(t, 5*time.Second), e.target())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("passphrase asked %d times for 3 dials, want once", n)
	}
}

func TestDialEncryptedKeyWrongPassphrase(t *testing.T) {
	encrypted, pub := encryptedKey(t, t.TempDir())
	e := newEnv(t, sshtest.Authorize(pub))
	e.trust()
	var calls atomic.Int32
	cfg := e.config()
	cfg.IdentityFile = encrypted
	cfg.Passphrase = func(string) ([]byte, error) { calls.Add(1); return []byte("wrong"), nil }
	d, err := provision.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for range 2 {
		_, err := d.Dial(ctxTimeout(t, 5*time.Second), e.target())
		var ae *provision.AuthError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), encrypted) || !strings.Contains(err.Error(), "wrong passphrase") {
			t.Errorf("err = %v, want an *AuthError naming %s and the wrong passphrase", err, encrypted)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("passphrase asked %d times, want once", n)
	}
}

func TestDialEncryptedKeyWithoutPassphrase(t *testing.T) {
	encrypted, pub := encryptedKey(t, t.TempDir())
	e := newEnv(t, sshtest.Authorize(pub))
	e.trust()
	cfg := e.config()
	cfg.IdentityFile = encrypted
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if !errors.Is(err, provision.ErrNoPassphrase) {
		t.Fatalf("err = %v, want ErrNoPassphrase", err)
	}
	for _, want := range []string{encrypted + " (encrypted, no passphrase", "spec.ssh.passphraseEnv", "terminal"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if len(e.srv.Offered()) != 0 {
		t.Errorf("offered %v: an unusable key must not be offered", e.srv.Offered())
	}

	// A later usable key still logs in.
	cfg.IdentityFiles = []string{e.keyFile}
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestDialAuthErrorListsWhatWasTried(t *testing.T) {
	e := newEnv(t)
	e.trust()
	a1, a2, f1 := sshtest.NewKey(t), sshtest.NewKey(t), sshtest.NewKey(t)
	sock := sshtest.NewAgent(t, a1, a2)
	cfg := e.config()
	cfg.User = "hactl"
	cfg.AgentSocket = sock
	cfg.IdentityFile = f1.WriteKeyFile(t, e.dir, "id_ed25519", 0o600)
	enc, _ := encryptedKey(t, e.dir)
	dup := a1.WriteKeyFile(t, e.dir, "id_dup", 0o600)
	cfg.IdentityFiles = []string{enc, dup}
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	var ae *provision.AuthError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *AuthError", err, err)
	}
	if ae.Host != "h1" || ae.User != "hactl" || ae.Address != e.srv.Host || len(ae.Tried) != 4 {
		t.Errorf("AuthError = %+v", ae)
	}
	// The agent's keys (order of the agent's list), then the files.
	agentKeys := fmt.Sprintf("ed25519 %s, ed25519 %s", fp(a1), fp(a2))
	if !strings.Contains(err.Error(), fmt.Sprintf("ed25519 %s, ed25519 %s", fp(a2), fp(a1))) && !strings.Contains(err.Error(), agentKeys) {
		t.Errorf("error %q lacks the agent's keys", err)
	}
	want := fmt.Sprintf("host h1: connect to %s: ssh: unable to authenticate as hactl@%s: tried agent (2 keys: ", net.JoinHostPort(e.srv.Host, strconv.Itoa(e.srv.Port)), e.srv.Host)
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	for _, want := range []string{
		fmt.Sprintf("), %s (ed25519 %s), %s (encrypted, no passphrase: ", cfg.IdentityFile, fp(f1), enc),
		fmt.Sprintf("%s (ed25519 %s, also in the agent)", dup, fp(a1)),
		"authorized_keys",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if !errors.Is(err, provision.ErrNoPassphrase) {
		t.Error("errors.Is(ErrNoPassphrase) is false")
	}
	if got := len(e.srv.Offered()); got != 3 {
		t.Errorf("offered %d keys, want 3 (2 agent + 1 file; duplicate and encrypted skipped)", got)
	}
}

func TestNewDialerNoKey(t *testing.T) {
	_, err := provision.NewDialer(provision.Config{User: "u", KnownHostsFile: "/nonexistent/known_hosts"})
	if err == nil || !strings.Contains(err.Error(), "no ssh key") {
		t.Errorf("err = %v, want a no-key error", err)
	}
}

func TestDialLegacyEncryptedPEM(t *testing.T) {
	// An encrypted "EC PRIVATE KEY" PEM hides its public key: without a
	// .pub file next to it the passphrase is asked when authentication
	// starts.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	// Deprecated, insecure legacy encryption: what is being tested.
	block, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", der, []byte("pw"), x509.PEMCipherAES128)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, sshtest.Authorize(pub))
	e.trust()
	cfg := e.config()
	cfg.IdentityFile = writeFile(t, e.dir, "id_ecdsa", pem.EncodeToMemory(block))
	var calls atomic.Int32
	cfg.Passphrase = func(string) ([]byte, error) { calls.Add(1); return []byte("pw"), nil }
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if calls.Load() != 1 {
		t.Errorf("passphrase asked %d times", calls.Load())
	}
}

// TestDialPerTargetUserAndKey: a target's own user and key file (hosts[*].ssh) are used for it, its
// key offered before Config's; other targets keep Config's user and keys.
func TestDialPerTargetUserAndKey(t *testing.T) {
	e := newEnv(t)
	e.trust()
	wrong := sshtest.NewKey(t)
	cfg := e.config()
	cfg.IdentityFile = wrong.WriteKeyFile(t, e.dir, "shared", 0o600) // authorized nowhere
	cfg.HostIdentityFiles = []string{e.keyFile}
	target := e.target()
	target.User, target.IdentityFile = "admin", e.keyFile
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := e.srv.Users(); len(got) == 0 || got[len(got)-1] != "admin" {
		t.Errorf("logged in as %v, want admin", got)
	}
	if got := e.srv.Offered(); len(got) == 0 || got[0] != fp(e.key) {
		t.Errorf("offered %v, want the target's key %s first", got, fp(e.key))
	}
	// A target naming a key file the Dialer was not given is a clear error, not a silent fallback.
	target.IdentityFile = filepath.Join(e.dir, "never-loaded")
	if _, err := provision.Dial(ctxTimeout(t, 5*time.Second), target, cfg); err == nil || !strings.Contains(err.Error(), "HostIdentityFiles") {
		t.Errorf("unknown target key file: %v", err)
	}
}
