package provision

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// DefaultPort is the SSH port used when [Target.Port] is zero.
const DefaultPort = 22

// Default keepalive settings (the equivalent of OpenSSH's ServerAliveInterval
// and ServerAliveCountMax): a connection whose server has not answered a
// keepalive for DefaultKeepAliveInterval*keepAliveCountMax is closed.
const (
	DefaultKeepAliveInterval = 15 * time.Second
	keepAliveCountMax        = 3
)

// DefaultProbeTimeout bounds the privilege probe [Dial] runs on each host when
// [Config.ConnectTimeout] is zero.
const DefaultProbeTimeout = 30 * time.Second

// Agent modes for [Config.Agent] (spec.ssh.agent).
const (
	// AgentAuto uses the agent when a socket is known (Config.AgentSocket
	// or $SSH_AUTH_SOCK); its keys are offered before the key files. An
	// agent that does not answer is skipped (and named in an
	// authentication error).
	AgentAuto = "auto"
	// AgentNever ignores any agent.
	AgentNever = "never"
	// AgentRequired fails [NewDialer] with an error wrapping [ErrNoAgent]
	// when no agent answers.
	AgentRequired = "required"
)

// Config holds the SSH settings shared by all hosts (spec.ssh in the cluster
// spec). Paths are local and must already be absolute or relative to the
// working directory; resolving them against the spec file and expanding ~ is
// the caller's job.
//
// Secrets (key passphrases, the sudo password) are never fields: they come
// from the Passphrase and SudoPassword callbacks, each called at most once per
// key / per [Dialer].
type Config struct {
	// User is the login user, e.g. "root" or "hactl". Required. A non-root
	// user needs sudo on the hosts (see [Privilege]).
	User string
	// IdentityFile is the path of an OpenSSH/PEM private key. It must not
	// be accessible by group or others (mode 0600 or stricter). Optional
	// when IdentityFiles or an agent provides keys.
	IdentityFile string
	// IdentityFiles are more private key files, offered in order after
	// IdentityFile (same rules).
	IdentityFiles []string
	// OnNewHostKey, when set, is told of every host key AcceptNewHostKeys added to KnownHostsFile:
	// the target's name, its "host:port" and the key's SHA256 fingerprint (so the user sees what
	// was trusted).
	OnNewHostKey func(host, hostPort, fingerprint string)
	// HostIdentityFiles are the key files of targets that have their own (Target.IdentityFile),
	// loaded with the others (same rules) so a bad one fails NewDialer, not a dial.
	HostIdentityFiles []string
	// Agent is AgentAuto (the default when empty), AgentNever or
	// AgentRequired.
	Agent string
	// AgentSocket is the ssh-agent's unix socket; empty means the
	// SSH_AUTH_SOCK environment variable (read once, by NewDialer).
	AgentSocket string
	// Passphrase returns the passphrase of the encrypted key file keyFile.
	// It is called at most once per key file per Dialer, and only when the
	// key is needed: when the server accepts its public key (or, for a
	// legacy PEM key without a ".pub" file next to it, when
	// authentication starts). Nil: encrypted keys are skipped and an
	// authentication failure names them and wraps [ErrNoPassphrase].
	Passphrase func(keyFile string) ([]byte, error)
	// SudoPassword returns the sudo password of User. It is called at most
	// once per Dialer, and only when a host asks for one. Nil: a host
	// whose sudo needs a password fails to connect with a
	// [*PrivilegeError].
	SudoPassword func() ([]byte, error)
	// KnownHostsFile is the OpenSSH known_hosts file host keys are checked
	// against. It may be missing: then every host is unknown, and with
	// AcceptNewHostKeys it is created with mode 0600. Required.
	KnownHostsFile string
	// AcceptNewHostKeys appends the key of a host that has no entry in
	// KnownHostsFile (trust on first use). A key that differs from a known
	// one is always refused. It never applies to the bastion.
	AcceptNewHostKeys bool
	// ConnectTimeout bounds TCP connect plus SSH handshake and
	// authentication (separately for the bastion and for each host), and,
	// separately, the privilege probe (time spent in SudoPassword not
	// counted). Zero means no limit other than the context's for the
	// connection, and DefaultProbeTimeout for the probe.
	ConnectTimeout time.Duration
	// KeepAliveInterval is how often a keepalive request is sent on an idle
	// or busy connection; after 3 unanswered intervals the connection is
	// closed and later calls fail. Zero means DefaultKeepAliveInterval;
	// negative disables keepalives.
	KeepAliveInterval time.Duration
	// Bastion is a jump host every target is reached through (like
	// OpenSSH's ProxyJump), or nil for direct connections. A target with its
	// own Target.Bastion uses that one instead.
	Bastion *BastionConfig
	// BastionFor maps a target address (as in Target.Address) to that
	// target's own bastion (spec.hosts[*].ssh.bastion), for
	// [Dialer.DialTCP]'s routing; addresses not in it go through Bastion.
	BastionFor map[string]*BastionConfig
}

// BastionConfig is an SSH jump host (spec.ssh.bastion). One connection to it
// is shared by all targets of a [Dialer]; targets are reached through it with
// direct-tcpip channels. Its host key must already be in its known_hosts file:
// Config.AcceptNewHostKeys never applies to it.
type BastionConfig struct {
	// Target is the bastion's address: Address may be an IP literal or a
	// DNS name (as reachable from this machine); Port zero means 22; Name
	// is used in messages ("bastion" when empty).
	Target Target
	// User is the login user on the bastion; empty means Config.User.
	User string
	// IdentityFile is the bastion's own key file, offered after the agent's
	// keys; empty means the keys of Config (IdentityFile, IdentityFiles).
	IdentityFile string
	// KnownHostsFile holds the bastion's host key; empty means
	// Config.KnownHostsFile.
	KnownHostsFile string
}

func (c Config) agentMode() string {
	if c.Agent == "" {
		return AgentAuto
	}
	return c.Agent
}

func (c Config) validate() error {
	var errs []error
	if c.User == "" {
		errs = append(errs, errors.New("ssh user is empty"))
	}
	for i, f := range c.IdentityFiles {
		if f == "" {
			errs = append(errs, fmt.Errorf("ssh identity file #%d of IdentityFiles is empty", i+1))
		}
	}
	switch c.agentMode() {
	case AgentAuto, AgentNever, AgentRequired:
	default:
		errs = append(errs, fmt.Errorf("ssh agent mode %q is not one of auto, never, required", c.Agent))
	}
	if c.IdentityFile == "" && len(c.IdentityFiles) == 0 && c.agentMode() == AgentNever {
		errs = append(errs, errors.New("no ssh key: set an identity file or use an agent"))
	}
	if c.KnownHostsFile == "" {
		errs = append(errs, errors.New("ssh known_hosts file is empty"))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("ssh connect timeout %s is negative", c.ConnectTimeout))
	}
	if b := c.Bastion; b != nil {
		if _, err := b.Target.bastionHostPort(); err != nil {
			errs = append(errs, fmt.Errorf("bastion: %w", err))
		}
	}
	for addr, b := range c.BastionFor {
		if _, err := b.Target.bastionHostPort(); err != nil {
			errs = append(errs, fmt.Errorf("bastion of %s: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

// Target is one host to connect to.
type Target struct {
	// Name is the host's name in the spec (e.g. "cp-a"); it is only used
	// in messages and errors.
	Name string
	// Address is an IP literal, v4 ("172.28.0.11") or v6 ("fd00::11",
	// without brackets). A v6 zone ("fe80::1%eth0") is only usable on a
	// direct connection, not through a bastion.
	Address string
	// Port is the SSH port; zero means DefaultPort (22).
	Port int
	// User is the login user on this host; "" means Config.User.
	User string
	// IdentityFile is this host's own key file, offered before Config's keys; it must be one of
	// Config.HostIdentityFiles. "" means Config's keys only.
	IdentityFile string
	// Bastion is this host's own jump host (spec.hosts[*].ssh.bastion); nil means
	// Config.Bastion. Its IdentityFile must be one of Config.HostIdentityFiles.
	Bastion *BastionConfig
}

func (t Target) port() (int, error) {
	port := t.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 1 || port > 65535 {
		return 0, fmt.Errorf("port %d is out of range 1-65535", t.Port)
	}
	return port, nil
}

// hostPort returns "addr:port" ("[v6]:port" for IPv6) for net.Dial.
func (t Target) hostPort() (string, error) {
	ip, err := netip.ParseAddr(t.Address)
	if err != nil {
		return "", fmt.Errorf("address %q is not an IP literal: %w", t.Address, err)
	}
	port, err := t.port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
}

// bastionHostPort is hostPort that also accepts a DNS name.
func (t Target) bastionHostPort() (string, error) {
	if _, err := netip.ParseAddr(t.Address); err == nil {
		return t.hostPort()
	}
	if !validHostname(t.Address) {
		return "", fmt.Errorf("address %q is neither an IP literal nor a DNS name", t.Address)
	}
	port, err := t.port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(t.Address, strconv.Itoa(port)), nil
}

// validHostname reports whether s is a plausible DNS name: dot-separated
// labels of letters, digits, '-' and '_', at most 253 characters.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// String returns "name (addr:port)".
func (t Target) String() string {
	hp, err := t.hostPort()
	if err != nil {
		hp = net.JoinHostPort(t.Address, strconv.Itoa(t.Port))
	}
	return t.Name + " (" + hp + ")"
}
