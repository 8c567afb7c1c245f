package provision

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
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

// Config holds the SSH settings shared by all hosts (spec.ssh in the cluster
// spec). Paths are local and must already be absolute or relative to the
// working directory; resolving them against the spec file and expanding ~ is
// the caller's job.
type Config struct {
	// User is the login user, e.g. "root". Required.
	User string
	// IdentityFile is the path of an unencrypted OpenSSH/PEM private key.
	// It must not be accessible by group or others (mode 0600 or stricter).
	// Required.
	IdentityFile string
	// KnownHostsFile is the OpenSSH known_hosts file host keys are checked
	// against. It may be missing: then every host is unknown, and with
	// AcceptNewHostKeys it is created with mode 0600. Required.
	KnownHostsFile string
	// AcceptNewHostKeys appends the key of a host that has no entry in
	// KnownHostsFile (trust on first use). A key that differs from a known
	// one is always refused.
	AcceptNewHostKeys bool
	// ConnectTimeout bounds TCP connect plus SSH handshake and
	// authentication. Zero means no limit other than the context's.
	ConnectTimeout time.Duration
	// KeepAliveInterval is how often a keepalive request is sent on an idle
	// or busy connection; after 3 unanswered intervals the connection is
	// closed and later calls fail. Zero means DefaultKeepAliveInterval;
	// negative disables keepalives.
	KeepAliveInterval time.Duration
}

func (c Config) validate() error {
	var errs []error
	if c.User == "" {
		errs = append(errs, errors.New("ssh user is empty"))
	}
	if c.IdentityFile == "" {
		errs = append(errs, errors.New("ssh identity file is empty"))
	}
	if c.KnownHostsFile == "" {
		errs = append(errs, errors.New("ssh known_hosts file is empty"))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("ssh connect timeout %s is negative", c.ConnectTimeout))
	}
	return errors.Join(errs...)
}

// Target is one host to connect to.
type Target struct {
	// Name is the host's name in the spec (e.g. "cp-a"); it is only used
	// in messages and errors.
	Name string
	// Address is an IP literal, v4 ("172.28.0.11") or v6 ("fd00::11",
	// without brackets).
	Address string
	// Port is the SSH port; zero means DefaultPort (22).
	Port int
}

// hostPort returns "addr:port" ("[v6]:port" for IPv6) for net.Dial.
func (t Target) hostPort() (string, error) {
	ip, err := netip.ParseAddr(t.Address)
	if err != nil {
		return "", fmt.Errorf("address %q is not an IP literal: %w", t.Address, err)
	}
	port := t.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("port %d is out of range 1-65535", t.Port)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
}

// String returns "name (addr:port)".
func (t Target) String() string {
	hp, err := t.hostPort()
	if err != nil {
		hp = net.JoinHostPort(t.Address, strconv.Itoa(t.Port))
	}
	return t.Name + " (" + hp + ")"
}
