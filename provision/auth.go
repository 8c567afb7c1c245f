package provision

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ErrUnprotectedKey is wrapped by the error [Dial] returns when the identity
// file is accessible by group or others. Like OpenSSH ("UNPROTECTED PRIVATE
// KEY FILE"), hactl refuses such keys: they must be mode 0600 (or 0400).
var ErrUnprotectedKey = errors.New("private key is accessible by group or others; keys must be mode 0600")

// ErrNoPassphrase is wrapped by an [*AuthError] that skipped an encrypted key
// file because [Config.Passphrase] is nil.
var ErrNoPassphrase = errors.New("key is encrypted and no passphrase was provided")

// ErrNoAgent is wrapped by the error of [NewDialer] when Config.Agent is
// AgentRequired and no ssh-agent answers (no socket, or it does not respond).
var ErrNoAgent = errors.New("no ssh-agent answered")

// agentTimeout bounds one request to the ssh-agent (listing keys, signing; a
// key added with "ssh-add -c" waits for a confirmation within it).
const agentTimeout = time.Minute

// AuthAttempt is one source of keys offered during authentication.
type AuthAttempt struct {
	// Source is "agent" or a key file's path.
	Source string
	// Detail describes the keys: "2 keys: ed25519 SHA256:…, rsa SHA256:…"
	// for the agent, "ed25519 SHA256:…" for a file, or why it was not
	// usable: "encrypted, no passphrase: …", "not reachable: …".
	Detail string
	// Err is why the source could not be used (wraps ErrNoPassphrase, a
	// passphrase or decryption error, the agent's dial error), or nil.
	Err error
}

func (a AuthAttempt) String() string { return a.Source + " (" + a.Detail + ")" }

// AuthError is returned (wrapped) by [Dial] when the server accepted none of
// the keys offered. Its message lists what was tried, e.g.
//
//	ssh: unable to authenticate as hactl@10.0.0.1: tried agent (2 keys: ed25519 SHA256:…),
//	/home/u/.ssh/id_ed25519 (ed25519 SHA256:…), /home/u/.ssh/id_rsa (encrypted, no passphrase: …)
//
// errors.Is sees through it to Err and to every attempt's Err (e.g.
// [ErrNoPassphrase]).
type AuthError struct {
	// Host is the target's name (the bastion's for a bastion).
	Host string
	// User and Address (IP or name, without port) are what was logged in
	// to.
	User, Address string
	// Tried lists the key sources in the order they were offered.
	Tried []AuthAttempt
	// Err is the SSH library's error, or the error of a key that the server
	// accepted but that could not sign (e.g. a wrong passphrase).
	Err error
}

func (e *AuthError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ssh: unable to authenticate as %s@%s: tried ", e.User, e.Address)
	if len(e.Tried) == 0 {
		b.WriteString("no key (no identity file, no agent)")
	}
	offered := false
	for i, a := range e.Tried {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
		offered = offered || a.Err == nil
	}
	var ke *keyError
	if errors.As(e.Err, &ke) {
		fmt.Fprintf(&b, "; %v", ke)
	} else if offered {
		fmt.Fprintf(&b, "; is one of these public keys in ~%s/.ssh/authorized_keys on the host?", e.User)
	}
	return b.String()
}

func (e *AuthError) Unwrap() []error {
	errs := []error{e.Err}
	for _, a := range e.Tried {
		if a.Err != nil {
			errs = append(errs, a.Err)
		}
	}
	return errs
}

// keyError is the error of a key file that could not sign.
type keyError struct {
	file string
	err  error
}

func (e *keyError) Error() string { return "key file " + e.file + ": " + e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// noPassphraseHint says how to provide a passphrase (the spec's field and the
// terminal prompt are the caller's, hactl's, ways).
const noPassphraseHint = "set spec.ssh.passphraseEnv to the name of an environment variable holding it, or run hactl on a terminal to be asked"

// keySource is one private key file, loaded once; encrypted keys are
// decrypted lazily, at most once.
type keySource struct {
	file       string
	encrypted  bool
	passphrase func(string) ([]byte, error)

	mu     sync.Mutex
	pem    []byte        // kept for decryption
	pub    ssh.PublicKey // nil for a legacy encrypted PEM key without .pub, until decrypted
	signer ssh.Signer
	err    error // decryption error, cached: the passphrase is asked once
}

// loadKeyFile reads a private key file, refusing files that group or others
// can access. An encrypted key is not decrypted here.
func loadKeyFile(file string, passphrase func(string) ([]byte, error)) (*keySource, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("identity file %s has mode %04o: %w (run: chmod 0600 %s)", file, perm, ErrUnprotectedKey, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	k := &keySource{file: file, passphrase: passphrase}
	signer, err := ssh.ParsePrivateKey(data)
	if err == nil {
		k.signer, k.pub = signer, signer.PublicKey()
		return k, nil
	}
	var pm *ssh.PassphraseMissingError
	if !errors.As(err, &pm) {
		return nil, fmt.Errorf("identity file %s: %w", file, err)
	}
	k.encrypted, k.pem, k.pub = true, data, pm.PublicKey
	if k.pub == nil {
		// Legacy PEM encryption hides the public key: use the .pub file
		// next to it when there is one.
		if b, err := os.ReadFile(file + ".pub"); err == nil {
			if pub, _, _, _, err := ssh.ParseAuthorizedKey(b); err == nil {
				k.pub = pub
			}
		}
	}
	return k, nil
}

// load returns the key's signer, decrypting it on first use.
func (k *keySource) load() (ssh.Signer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.signer != nil || k.err != nil {
		return k.signer, k.err
	}
	if k.passphrase == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoPassphrase, noPassphraseHint)
	}
	pass, err := k.passphrase(k.file)
	if err != nil {
		k.err = fmt.Errorf("get passphrase: %w", err)
		return nil, k.err
	}
	signer, err := ssh.ParsePrivateKeyWithPassphrase(k.pem, pass)
	clear(pass)
	switch {
	case errors.Is(err, x509.IncorrectPasswordError):
		k.err = fmt.Errorf("wrong passphrase: %w", err)
	case err != nil:
		k.err = fmt.Errorf("decrypt: %w", err)
	case k.pub != nil && !bytes.Equal(k.pub.Marshal(), signer.PublicKey().Marshal()):
		k.err = fmt.Errorf("the decrypted key does not match %s.pub", k.file)
	default:
		k.signer, k.pub, k.pem = signer, signer.PublicKey(), nil
	}
	return k.signer, k.err
}

// state returns the public key and decryption state without triggering a
// decryption.
func (k *keySource) state() (ssh.PublicKey, ssh.Signer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pub, k.signer, k.err
}

// attempt describes k for an AuthError.
func (k *keySource) attempt(dup bool) AuthAttempt {
	a := AuthAttempt{Source: k.file}
	pub, signer, err := k.state()
	switch {
	case err != nil:
		a.Detail, a.Err = "encrypted: "+err.Error(), &keyError{k.file, err}
	case k.encrypted && signer == nil && k.passphrase == nil:
		a.Detail = "encrypted, no passphrase: " + noPassphraseHint
		a.Err = &keyError{k.file, ErrNoPassphrase}
	case pub == nil:
		a.Detail = "encrypted, not decrypted"
	default:
		a.Detail = describeKey(pub)
		if k.encrypted {
			a.Detail = "encrypted " + a.Detail
		}
	}
	if dup {
		a.Detail += ", also in the agent"
	}
	return a
}

// lazySigner signs with a keySource, decrypting it only when the server has
// accepted its public key (as OpenSSH asks for a passphrase).
type lazySigner struct {
	k   *keySource
	pub ssh.PublicKey
}

func (s lazySigner) PublicKey() ssh.PublicKey { return s.pub }

func (s lazySigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	return s.SignWithAlgorithm(rand, data, "")
}

func (s lazySigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	signer, err := s.k.load()
	if err != nil {
		return nil, &keyError{s.k.file, err}
	}
	if as, ok := signer.(ssh.AlgorithmSigner); ok {
		return as.SignWithAlgorithm(rand, data, algorithm)
	}
	return signer.Sign(rand, data)
}

// describeKey returns "ed25519 SHA256:…".
func describeKey(k ssh.PublicKey) string {
	return keyscanType(k) + " " + ssh.FingerprintSHA256(k)
}

// auth holds the keys of a Dialer: the agent's and the key files', loaded
// once and shared by every dial.
type auth struct {
	agentSocket  string
	agentErr     error    // why the agent is not used (auto mode), or nil
	agentConn    net.Conn // nil when no agent is used
	agentSigners []ssh.Signer
	keys         []*keySource          // Config.IdentityFile, Config.IdentityFiles
	hostKeys     map[string]*keySource // Config.HostIdentityFiles and Config.Bastion.IdentityFile by path
}

// newAuth loads cfg's key files and connects to the agent. getenv reads
// SSH_AUTH_SOCK when cfg.AgentSocket is empty.
func newAuth(cfg Config, getenv func(string) string) (*auth, error) {
	a := &auth{}
	files := cfg.IdentityFiles
	if cfg.IdentityFile != "" {
		files = append([]string{cfg.IdentityFile}, files...)
	}
	for _, f := range files {
		k, err := loadKeyFile(f, cfg.Passphrase)
		if err != nil {
			return nil, err
		}
		a.keys = append(a.keys, k)
	}
	for _, f := range cfg.HostIdentityFiles {
		if _, ok := a.hostKeys[f]; ok {
			continue
		}
		k, err := loadKeyFile(f, cfg.Passphrase)
		if err != nil {
			return nil, err
		}
		if a.hostKeys == nil {
			a.hostKeys = map[string]*keySource{}
		}
		a.hostKeys[f] = k
	}
	if b := cfg.Bastion; b != nil && b.IdentityFile != "" {
		if _, ok := a.hostKeys[b.IdentityFile]; !ok {
			k, err := loadKeyFile(b.IdentityFile, cfg.Passphrase)
			if err != nil {
				return nil, fmt.Errorf("bastion: %w", err)
			}
			if a.hostKeys == nil {
				a.hostKeys = map[string]*keySource{}
			}
			a.hostKeys[b.IdentityFile] = k
		}
	}

	mode := cfg.agentMode()
	if mode == AgentNever {
		return a, nil
	}
	a.agentSocket = cfg.AgentSocket
	if a.agentSocket == "" {
		a.agentSocket = getenv("SSH_AUTH_SOCK")
	}
	if a.agentSocket == "" {
		if mode == AgentRequired {
			return nil, fmt.Errorf("ssh agent is required but SSH_AUTH_SOCK is not set: %w", ErrNoAgent)
		}
		return a, nil // auto without an agent: not worth mentioning
	}
	if err := a.connectAgent(); err != nil {
		if mode == AgentRequired {
			return nil, fmt.Errorf("ssh agent is required: %w: %w", ErrNoAgent, err)
		}
		a.agentErr = err
	}
	return a, nil
}

func (a *auth) connectAgent() error {
	nc, err := net.DialTimeout("unix", a.agentSocket, agentTimeout)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.agentSocket, err)
	}
	signers, err := agent.NewClient(&deadlineConn{nc}).Signers()
	if err != nil {
		nc.Close()
		return fmt.Errorf("agent %s: list keys: %w", a.agentSocket, err)
	}
	a.agentConn, a.agentSigners = nc, signers
	return nil
}

// close closes the agent connection.
func (a *auth) close() {
	if a.agentConn != nil {
		a.agentConn.Close()
	}
}

// sources returns the key files for a target or a bastion (hostKey: its own key file, "" for
// none): a bastion's own key alone, else Config's keys; a target's own key first, then Config's.
func (a *auth) sources(bastion bool, hostKey string) []*keySource {
	k, ok := a.hostKeys[hostKey]
	switch {
	case ok && bastion:
		return []*keySource{k}
	case ok:
		return append([]*keySource{k}, a.keys...)
	}
	return a.keys
}

// method returns the public-key auth method for a target or the bastion: the
// agent's keys first, then the key files in order (a key also held by the
// agent, or an encrypted one without passphrase, is not offered twice or at
// all).
func (a *auth) method(bastion bool, hostKey string) ssh.AuthMethod {
	return ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		signers := append([]ssh.Signer(nil), a.agentSigners...)
		seen := map[string]bool{}
		for _, s := range signers {
			seen[string(s.PublicKey().Marshal())] = true
		}
		for _, k := range a.sources(bastion, hostKey) {
			if k.encrypted && k.passphrase == nil {
				continue
			}
			pub, _, err := k.state()
			if pub == nil && err == nil {
				// Legacy encrypted PEM without .pub: decrypt now to
				// learn the public key.
				_, err = k.load()
				pub, _, _ = k.state()
			}
			if err != nil {
				continue
			}
			if id := string(pub.Marshal()); !seen[id] {
				seen[id] = true
				signers = append(signers, lazySigner{k, pub})
			}
		}
		return signers, nil
	})
}

// attempts describes what method offers, for an AuthError.
func (a *auth) attempts(bastion bool, hostKey string) []AuthAttempt {
	var out []AuthAttempt
	seen := map[string]bool{}
	switch {
	case a.agentErr != nil:
		out = append(out, AuthAttempt{Source: "agent", Detail: "not reachable: " + a.agentErr.Error(), Err: a.agentErr})
	case a.agentConn != nil:
		descs := make([]string, len(a.agentSigners))
		for i, s := range a.agentSigners {
			descs[i] = describeKey(s.PublicKey())
			seen[string(s.PublicKey().Marshal())] = true
		}
		detail := "no keys"
		switch len(descs) {
		case 0:
		case 1:
			detail = "1 key: " + descs[0]
		default:
			detail = fmt.Sprintf("%d keys: %s", len(descs), strings.Join(descs, ", "))
		}
		out = append(out, AuthAttempt{Source: "agent", Detail: detail})
	}
	for _, k := range a.sources(bastion, hostKey) {
		pub, _, _ := k.state()
		dup := pub != nil && seen[string(pub.Marshal())]
		out = append(out, k.attempt(dup))
	}
	return out
}

// deadlineConn bounds every agent read and write by agentTimeout, so a stuck
// agent fails the handshake instead of hanging it.
type deadlineConn struct{ net.Conn }

func (c *deadlineConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(agentTimeout))
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(agentTimeout))
	return c.Conn.Write(p)
}
