package provision

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hactl/hactl/internal/shell"
)

// HostKeyError is returned by [Dial] when the host key presented by a server
// cannot be trusted: either the host has no entry in the known_hosts file
// (Known is empty) or its key differs from the recorded one (Known is not
// empty; see [HostKeyError.Changed]). A changed key is never replaced by hactl,
// not even with [Config.AcceptNewHostKeys]; neither is a bastion's unknown key
// ever accepted.
type HostKeyError struct {
	// Host is the target's name (the bastion's for a bastion).
	Host string
	// Bastion is true when the key is the bastion's.
	Bastion bool
	// Address is the host in known_hosts form: "10.0.0.1" for port 22,
	// "[10.0.0.1]:2222" or "[fd00::1]:2222" otherwise.
	Address string
	// Port is the SSH port.
	Port int
	// Key is the key the server presented.
	Key ssh.PublicKey
	// KnownHostsFile is the file that was consulted.
	KnownHostsFile string
	// Known lists the keys recorded for Address (file and 1-based line).
	// Empty means the host is unknown.
	Known []knownhosts.KnownKey
}

// Changed reports whether the host is known with a different key (possible
// man-in-the-middle, or a reinstalled host).
func (e *HostKeyError) Changed() bool { return len(e.Known) > 0 }

// Fingerprint returns the presented key's fingerprint, "SHA256:<base64>", as
// printed by ssh-keygen -l.
func (e *HostKeyError) Fingerprint() string { return ssh.FingerprintSHA256(e.Key) }

func (e *HostKeyError) Error() string {
	var b strings.Builder
	if !e.Changed() && e.Bastion {
		fmt.Fprintf(&b, "host %s: host key of bastion %s is unknown (not in %s): %s %s; "+
			"hactl never accepts a bastion's key automatically (not even with --accept-new-host-keys): "+
			"check the fingerprint out of band, e.g. on the bastion's console with 'ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub', "+
			"then add it with 'ssh-keyscan -p %d -t %s %s >> %s'",
			e.Host, e.Address, e.KnownHostsFile, e.Key.Type(), e.Fingerprint(),
			keyscanType(e.Key), e.Port, keyscanType(e.Key), hostOnly(e.Address), e.KnownHostsFile)
		return b.String()
	}
	if !e.Changed() {
		fmt.Fprintf(&b, "host %s: host key of %s is unknown (not in %s): %s %s; "+
			"to trust it, re-run with --accept-new-host-keys after checking the fingerprint out of band, "+
			"e.g. on the host's console with 'ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub' "+
			"or from a trusted network with 'ssh-keyscan -p %d -t %s %s | ssh-keygen -lf -'",
			e.Host, e.Address, e.KnownHostsFile, e.Key.Type(), e.Fingerprint(),
			keyscanType(e.Key), e.Port, keyscanType(e.Key), hostOnly(e.Address))
		return b.String()
	}
	fmt.Fprintf(&b, "host %s: REMOTE HOST KEY CHANGED for %s: the server presented %s %s, but ",
		e.Host, e.Address, e.Key.Type(), e.Fingerprint())
	for i, k := range e.Known {
		if i > 0 {
			b.WriteString(" and ")
		}
		fmt.Fprintf(&b, "%s:%d holds %s %s", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key))
	}
	fix := "re-run with --accept-new-host-keys"
	if e.Bastion {
		fix = "add the new one (ssh-keyscan, after checking its fingerprint out of band)"
	}
	fmt.Fprintf(&b, "; this may be a man-in-the-middle attack or a reinstalled host. hactl never replaces a known key: "+
		"if the change is expected, remove the old entry (%s) and %s",
		shell.Join("ssh-keygen", "-R", e.Address, "-f", e.KnownHostsFile), fix)
	return b.String()
}

// keyscanType maps a key type to ssh-keyscan's -t name.
func keyscanType(k ssh.PublicKey) string {
	switch t := k.Type(); {
	case t == ssh.KeyAlgoRSA:
		return "rsa"
	case t == ssh.KeyAlgoED25519:
		return "ed25519"
	case strings.HasPrefix(t, "ecdsa-"):
		return "ecdsa"
	default:
		return t
	}
}

// hostOnly strips the "[...]:port" decoration of a known_hosts address.
func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// hostKeyChecker verifies server host keys against one known_hosts file.
type hostKeyChecker struct {
	target  Target
	port    int
	file    string
	accept  bool
	onNew   func(host, hostPort, fingerprint string) // Config.OnNewHostKey
	bastion bool
}

// loadKnownHosts parses file; a missing file is an empty database.
func loadKnownHosts(file string) (ssh.HostKeyCallback, error) {
	cb, err := knownhosts.New(file)
	if errors.Is(err, os.ErrNotExist) {
		return knownhosts.New()
	}
	if err != nil {
		return nil, fmt.Errorf("read known_hosts file: %w", err)
	}
	return cb, nil
}

// probeKey is a syntactically valid key that matches no real host key; checking
// it against known_hosts yields every key recorded for an address.
var probeKey = func() ssh.PublicKey {
	k, err := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	if err != nil {
		panic(err)
	}
	return k
}()

// hostKeyAlgorithms returns the host key algorithms to offer for hostPort: those
// of the keys already known for it, so a server with several host keys presents
// the one we can check instead of an unknown type that would look "changed".
// It returns nil (library default) for an unknown host.
func (h *hostKeyChecker) hostKeyAlgorithms(hostPort string, remote net.Addr) ([]string, error) {
	cb, err := loadKnownHosts(h.file)
	if err != nil {
		return nil, err
	}
	var ke *knownhosts.KeyError
	if err := cb(hostPort, remote, probeKey); !errors.As(err, &ke) {
		return nil, nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, s := range a {
			if !seen[s] {
				seen[s] = true
				algos = append(algos, s)
			}
		}
	}
	for _, k := range ke.Want {
		if k.Key.Type() == ssh.KeyAlgoRSA {
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		} else {
			add(k.Key.Type())
		}
	}
	return algos, nil
}

// check is the ssh.HostKeyCallback.
func (h *hostKeyChecker) check(hostPort string, remote net.Addr, key ssh.PublicKey) error {
	cb, err := loadKnownHosts(h.file)
	if err != nil {
		return err
	}
	err = cb(hostPort, remote, key)
	if err == nil {
		return nil
	}
	if hkErr := h.classify(hostPort, key, err); hkErr != nil {
		if hkErr.Changed() || !h.accept {
			return hkErr
		}
		return h.appendKey(hostPort, remote, key)
	}
	return err
}

// classify turns a knownhosts.KeyError into a HostKeyError; other errors
// (revoked key, unreadable file) give nil.
func (h *hostKeyChecker) classify(hostPort string, key ssh.PublicKey, err error) *HostKeyError {
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return nil
	}
	e := &HostKeyError{
		Host:           h.target.Name,
		Bastion:        h.bastion,
		Address:        knownhosts.Normalize(hostPort),
		Port:           h.port,
		Key:            key,
		KnownHostsFile: h.file,
	}
	// Prefer reporting the entries of the presented key's type; the others are
	// irrelevant to the mismatch.
	for _, k := range ke.Want {
		if k.Key.Type() == key.Type() {
			e.Known = append(e.Known, k)
		}
	}
	if len(e.Known) == 0 {
		e.Known = ke.Want
	}
	return e
}

// appendKey records an unknown host key in the known_hosts file. It holds an
// exclusive lock on the file (flock, where available) while it re-checks the
// file and appends one line with a single write on an O_APPEND descriptor, so
// parallel dials (goroutines or processes) neither corrupt the file nor add
// duplicate lines.
func (h *hostKeyChecker) appendKey(hostPort string, remote net.Addr, key ssh.PublicKey) error {
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		return fmt.Errorf("add host key to known_hosts: %w", err)
	}
	f, err := os.OpenFile(h.file, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("add host key to known_hosts: %w", err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return fmt.Errorf("add host key to known_hosts: lock %s: %w", h.file, err)
	}
	// Closing f releases the lock.

	// Another dial may have added this host meanwhile.
	cb, err := loadKnownHosts(h.file)
	if err != nil {
		return err
	}
	if err := cb(hostPort, remote, key); err == nil {
		return nil
	} else if hkErr := h.classify(hostPort, key, err); hkErr == nil {
		return err
	} else if hkErr.Changed() {
		return hkErr
	}

	content, err := os.ReadFile(h.file)
	if err != nil {
		return fmt.Errorf("add host key to known_hosts: %w", err)
	}
	line := knownhosts.Line([]string{hostPort}, key) + "\n"
	if len(content) > 0 && !bytes.HasSuffix(content, []byte("\n")) {
		line = "\n" + line
	}
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("add host key to known_hosts %s: %w", h.file, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("add host key to known_hosts %s: %w", h.file, err)
	}
	if h.onNew != nil {
		h.onNew(h.target.Name, hostPort, ssh.FingerprintSHA256(key))
	}
	return nil
}

// portOf returns the numeric port of "host:port" (22 if unparsable).
func portOf(hostPort string) int {
	_, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		return DefaultPort
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return DefaultPort
	}
	return n
}

// KnownHostKeys returns every host key file records for the host at addr (an IP or name) and SSH
// port (the "[addr]:port" form for a port other than 22, as OpenSSH writes it), in file order; none
// when the host is not in the file or the file does not exist. Errors: the file cannot be read or
// parsed. It is how `hactl operator deploy` pins a spare's host keys in the EtcdCluster.
func KnownHostKeys(file, addr string, port int) ([]ssh.PublicKey, error) {
	cb, err := loadKnownHosts(file)
	if err != nil {
		return nil, err
	}
	hostPort := net.JoinHostPort(addr, strconv.Itoa(port))
	remote := &net.TCPAddr{IP: net.ParseIP(addr), Port: port}
	var ke *knownhosts.KeyError
	if err := cb(hostPort, remote, probeKey); !errors.As(err, &ke) {
		return nil, nil // the probe matched nothing: no entry (or the zero key itself, never written)
	}
	var keys []ssh.PublicKey
	for _, k := range ke.Want {
		keys = append(keys, k.Key)
	}
	return keys, nil
}
