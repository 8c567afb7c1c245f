package provision

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrDialerClosed is wrapped by the error of [Dialer.Dial] after
// [Dialer.Close].
var ErrDialerClosed = errors.New("dialer is closed")

// Dialer connects to many hosts with one set of credentials: the key files
// and the agent's keys are loaded once, the sudo password is asked at most
// once, and with a bastion one connection to it is shared by every target.
// It is safe for concurrent use. Build it with [NewDialer]; Close it when no
// more hosts will be dialled (open clients keep working; the bastion
// connection and the agent connection are closed when the last one closes).
type Dialer struct {
	cfg  Config
	auth *auth

	pwMu   sync.Mutex
	pwDone bool
	pw     []byte
	pwErr  error

	mu       sync.Mutex
	refs     int // 1 for the Dialer until Close, plus 1 per client and dial in progress
	closed   bool
	bastions map[string]*bastionSlot // by bastionKey
}

// bastionSlot is one bastion's shared connection.
type bastionSlot struct {
	client *ssh.Client
	err    error
	wait   chan struct{} // closed when the dial in progress ends
}

// bastionKey identifies a bastion connection: who logs in where, with which key and known_hosts.
func bastionKey(b *BastionConfig) string {
	hp, _ := b.Target.bastionHostPort()
	return b.User + "@" + hp + "|" + b.IdentityFile + "|" + b.KnownHostsFile
}

// bastionOf is the bastion target t is reached through: its own, else Config.Bastion (nil: direct).
func (d *Dialer) bastionOf(t Target) *BastionConfig {
	if t.Bastion != nil {
		return t.Bastion
	}
	return d.cfg.Bastion
}

// NewDialer validates cfg, reads its key files (encrypted ones are decrypted
// later, only when needed) and connects to the ssh-agent (cfg.Agent,
// cfg.AgentSocket or $SSH_AUTH_SOCK). It contacts no host.
//
// Errors: an invalid cfg; a key file that is missing, unreadable or not a
// private key, or whose mode allows group/other access (wraps
// [ErrUnprotectedKey]); with AgentRequired an agent that does not answer
// (wraps [ErrNoAgent]); no key at all (no key file and no agent).
func NewDialer(cfg Config) (*Dialer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a, err := newAuth(cfg, os.Getenv)
	if err != nil {
		return nil, err
	}
	if len(a.keys) == 0 && len(a.hostKeys) == 0 && a.agentConn == nil {
		a.close()
		msg := "no ssh key: no identity file is set and no ssh-agent is available (SSH_AUTH_SOCK is not set)"
		if a.agentErr != nil {
			msg = fmt.Sprintf("no ssh key: no identity file is set and the ssh-agent does not answer (%v)", a.agentErr)
		}
		return nil, errors.New(msg)
	}
	return &Dialer{cfg: cfg, auth: a, refs: 1}, nil
}

// Close releases the Dialer: later Dial calls fail with [ErrDialerClosed].
// The bastion and agent connections stay open until every client dialled
// with it is closed. It is safe to call more than once; it returns the
// error of closing the bastion connection, if that happens now.
func (d *Dialer) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	return d.release()
}

// acquire takes a reference for a dial; false once the Dialer is closed.
func (d *Dialer) acquire() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.refs++
	return true
}

// release drops a reference; the last one closes the bastion and the agent.
func (d *Dialer) release() error {
	d.mu.Lock()
	d.refs--
	last := d.refs == 0
	bastions := d.bastions
	if last {
		d.bastions = nil
	}
	d.mu.Unlock()
	if !last {
		return nil
	}
	d.auth.close()
	var errs []error
	for _, s := range bastions {
		if s.client == nil {
			continue
		}
		if err := s.client.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("close bastion connection: %w", err))
		}
	}
	return errors.Join(errs...)
}

// sudoPassword returns Config.SudoPassword's answer, asking once.
func (d *Dialer) sudoPassword() ([]byte, error) {
	d.pwMu.Lock()
	defer d.pwMu.Unlock()
	if !d.pwDone {
		d.pwDone = true
		d.pw, d.pwErr = d.cfg.SudoPassword()
		if d.pwErr == nil && len(d.pw) == 0 {
			d.pwErr = errors.New("the sudo password is empty")
		}
		if d.pwErr == nil && strings.ContainsAny(string(d.pw), "\n\r\x00") {
			d.pwErr = errors.New("the sudo password contains a newline or NUL")
		}
	}
	return d.pw, d.pwErr
}

// Dial connects to t with a one-off [Dialer] for cfg: see [NewDialer] and
// [Dialer.Dial]. When dialling several hosts, use one Dialer instead: keys
// are then loaded, passphrases and the sudo password asked, and the bastion
// dialled once for all of them.
//
// Errors are those of NewDialer and Dialer.Dial, prefixed with the host.
func Dial(ctx context.Context, t Target, cfg Config) (*Client, error) {
	d, err := NewDialer(cfg)
	if err != nil {
		hp, herr := t.hostPort()
		if herr != nil {
			return nil, fmt.Errorf("host %s: %w", t.Name, herr)
		}
		return nil, fmt.Errorf("host %s: connect to %s: %w", t.Name, hp, err)
	}
	defer d.Close() // the client keeps what it needs open
	return d.Dial(ctx, t)
}

// Dial connects to t (through the bastion, when the Config has one),
// verifies its host key against Config.KnownHostsFile, authenticates as
// Config.User (agent keys first, then the key files in order), and probes
// the user's privilege with one remote command (see [Privilege]). The
// bastion is dialled on first use and shared by all targets.
//
// ctx and ConnectTimeout bound the TCP connect (or the bastion's forwarded
// channel), the SSH handshake and authentication; the probe is bounded by
// ConnectTimeout (DefaultProbeTimeout when zero) not counting time spent in
// Config.SudoPassword. After Dial returns, ctx no longer affects the
// connection. The connection sends keepalives (Config.KeepAliveInterval) and
// is closed when the host stops answering them.
//
// Errors (all prefixed with the host): an invalid target (not an IP literal,
// port out of range, an IPv6 zone through a bastion); a [*HostKeyError] for
// an unknown host (without AcceptNewHostKeys) or a changed host key, or for
// the bastion's key (never accepted automatically); an [*AuthError] listing
// the keys tried; a [*PrivilegeError] when the user is not root and sudo is
// missing, asks for a password that was not provided, or refuses it; a
// [*CommandError] when the probe fails otherwise; network errors; on
// cancellation or timeout an error wrapping context.Canceled or
// context.DeadlineExceeded; [ErrDialerClosed] after Close.
func (d *Dialer) Dial(ctx context.Context, t Target) (*Client, error) {
	hostPort, err := t.hostPort()
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", t.Name, err)
	}
	via := ""
	bastion := d.bastionOf(t)
	if bastion != nil {
		bhp, err := bastion.Target.bastionHostPort()
		if err != nil {
			return nil, fmt.Errorf("host %s: bastion: %w", t.Name, err)
		}
		via = " via bastion " + bhp
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("host %s: connect to %s%s: "+format, append([]any{t.Name, hostPort, via}, args...)...)
	}
	if !d.acquire() {
		return nil, fail("%w", ErrDialerClosed)
	}
	keep := false
	defer func() {
		if !keep {
			_ = d.release()
		}
	}()

	dialNet := func(ctx context.Context) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "tcp", hostPort)
	}
	if bastion != nil {
		if ip, _ := netip.ParseAddr(t.Address); ip.Zone() != "" {
			return nil, fail("the IPv6 zone %q of address %s is meaningless through a bastion", ip.Zone(), t.Address)
		}
		if f := bastion.IdentityFile; f != "" {
			if _, ok := d.auth.hostKeys[f]; !ok {
				return nil, fail("the bastion's key file %s is not among the Dialer's HostIdentityFiles", f)
			}
		}
		bc, err := d.bastionClient(ctx, bastion)
		if err != nil {
			return nil, fail("%w", err)
		}
		dialNet = func(ctx context.Context) (net.Conn, error) {
			nc, err := bc.DialContext(ctx, "tcp", hostPort)
			var oe *ssh.OpenChannelError
			if errors.As(err, &oe) {
				return nil, fmt.Errorf("the bastion refused to open a connection to %s (is TCP forwarding allowed for its user?): %w", hostPort, err)
			}
			return nc, err
		}
	}

	user := t.User
	if user == "" {
		user = d.cfg.User
	}
	if _, ok := d.auth.hostKeys[t.IdentityFile]; t.IdentityFile != "" && !ok {
		return nil, fail("key file %s is not among the Dialer's HostIdentityFiles", t.IdentityFile)
	}
	conn, err := d.connect(ctx, endpoint{
		target:   t,
		hostPort: hostPort,
		user:     user,
		checker:  &hostKeyChecker{target: t, port: portOf(hostPort), file: d.cfg.KnownHostsFile, accept: d.cfg.AcceptNewHostKeys, onNew: d.cfg.OnNewHostKey},
		dial:     dialNet,
		fail:     fail,
	})
	if err != nil {
		return nil, err
	}

	c := &Client{
		target:  t,
		user:    user,
		conn:    conn,
		done:    make(chan struct{}),
		release: d.release,
	}
	interval := d.cfg.KeepAliveInterval
	if interval == 0 {
		interval = DefaultKeepAliveInterval
	}
	if interval > 0 {
		c.wg.Add(1)
		go c.keepAlive(interval)
	}
	keep = true // c.Close releases

	timeout := d.cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	var password func() ([]byte, error)
	if d.cfg.SudoPassword != nil {
		password = d.sudoPassword
	}
	if err := c.probe(ctx, timeout, password); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// bastionClient returns the shared connection to bastion b, dialling it on
// first use. Concurrent callers wait for one dial (or for their ctx). A
// failure is remembered unless it was the dialling caller's cancellation, so
// every target behind b reports the same bastion error without redialling.
func (d *Dialer) bastionClient(ctx context.Context, b *BastionConfig) (*ssh.Client, error) {
	key := bastionKey(b)
	for {
		d.mu.Lock()
		if d.bastions == nil {
			d.bastions = map[string]*bastionSlot{}
		}
		s := d.bastions[key]
		if s == nil {
			s = &bastionSlot{}
			d.bastions[key] = s
		}
		switch {
		case s.client != nil:
			c := s.client
			d.mu.Unlock()
			return c, nil
		case s.err != nil:
			err := s.err
			d.mu.Unlock()
			return nil, err
		case s.wait == nil:
			wait := make(chan struct{})
			s.wait = wait
			d.mu.Unlock()
			c, err := d.dialBastion(ctx, b)
			d.mu.Lock()
			s.wait = nil
			close(wait)
			if err == nil {
				s.client = c
			} else if ctx.Err() == nil {
				s.err = err
			}
			d.mu.Unlock()
			return c, err
		}
		wait := s.wait
		d.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the bastion connection: %w", context.Cause(ctx))
		}
	}
}

// dialBastion connects to bastion b. Its host key must be known.
func (d *Dialer) dialBastion(ctx context.Context, b *BastionConfig) (*ssh.Client, error) {
	t := b.Target
	if t.Name == "" {
		t.Name = "bastion"
	}
	t.IdentityFile = b.IdentityFile // its own key, alone (auth.sources)
	hostPort, err := t.bastionHostPort()
	if err != nil {
		return nil, fmt.Errorf("bastion %s: %w", t.Name, err)
	}
	user, known := b.User, b.KnownHostsFile
	if user == "" {
		user = d.cfg.User
	}
	if known == "" {
		known = d.cfg.KnownHostsFile
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("host %s: connect to bastion %s: "+format, append([]any{t.Name, hostPort}, args...)...)
	}
	return d.connect(ctx, endpoint{
		target:   t,
		hostPort: hostPort,
		user:     user,
		bastion:  true,
		checker:  &hostKeyChecker{target: t, port: portOf(hostPort), file: known, bastion: true},
		dial: func(ctx context.Context) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "tcp", hostPort)
		},
		fail: fail,
	})
}

// endpoint is one SSH server to connect to: a target or the bastion.
type endpoint struct {
	target   Target
	hostPort string // as in known_hosts lookups
	user     string
	bastion  bool
	checker  *hostKeyChecker
	dial     func(context.Context) (net.Conn, error)
	fail     func(format string, args ...any) error // prefixes host and address
}

// connect opens the transport, verifies the host key and authenticates.
func (d *Dialer) connect(ctx context.Context, ep endpoint) (*ssh.Client, error) {
	fail := ep.fail
	timeout := d.cfg.ConnectTimeout
	dctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ctxErr := func(err error) error {
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			return fail("cancelled: %w (%v)", context.Cause(ctx), err)
		case ctx.Err() == nil && timeout > 0:
			return fail("timed out after %s (connect timeout): %w (%v)", timeout, context.DeadlineExceeded, err)
		default:
			return fail("timed out: %w (%v)", context.DeadlineExceeded, err)
		}
	}

	nc, err := ep.dial(dctx)
	if err != nil {
		if dctx.Err() != nil {
			return nil, ctxErr(err)
		}
		return nil, fail("%w", err)
	}
	// Handshake and auth are blocking reads/writes on nc: bound them by the
	// deadline and unblock them on cancellation. A channel forwarded by the
	// bastion has no deadlines: closing it unblocks them.
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(dctx, func() {
		if nc.SetDeadline(time.Now()) != nil {
			nc.Close()
		}
	})

	algos, err := ep.checker.hostKeyAlgorithms(ep.hostPort, nc.RemoteAddr())
	if err != nil {
		stop()
		nc.Close()
		return nil, fail("%w", err)
	}
	var (
		hkMu     sync.Mutex
		hkResult error // set by the callback, which runs on the handshake goroutine
	)
	sshCfg := &ssh.ClientConfig{
		User: ep.user,
		Auth: []ssh.AuthMethod{d.auth.method(ep.bastion, ep.target.IdentityFile)},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			err := ep.checker.check(hostname, remote, key)
			hkMu.Lock()
			hkResult = err
			hkMu.Unlock()
			return err
		},
		HostKeyAlgorithms: algos,
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, ep.hostPort, sshCfg)
	interrupted := !stop()
	hkMu.Lock()
	hostKeyErr := hkResult
	hkMu.Unlock()
	if err != nil || interrupted {
		if sc != nil {
			sc.Close()
		}
		nc.Close()
		var ke *keyError
		switch {
		case hostKeyErr != nil:
			var hk *HostKeyError
			if errors.As(hostKeyErr, &hk) {
				return nil, hostKeyErr // already names the host
			}
			return nil, fail("verify host key: %w", hostKeyErr)
		case interrupted || dctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded):
			// The connection deadline can expire just before dctx's timer.
			return nil, ctxErr(err)
		case errors.As(err, &ke) || strings.Contains(err.Error(), "unable to authenticate") ||
			strings.Contains(err.Error(), "Too many authentication failures"):
			return nil, fail("%w", &AuthError{
				Host:    ep.target.Name,
				User:    ep.user,
				Address: hostOnly(ep.hostPort),
				Tried:   d.auth.attempts(ep.bastion, ep.target.IdentityFile),
				Err:     err,
			})
		default:
			return nil, fail("%w", err)
		}
	}
	_ = nc.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// DialTCP opens a plain TCP connection to addr ("host:port") the way the hosts are reached: through
// the shared bastion connection when one is configured (an SSH direct-tcpip channel, like
// `ssh -W`), else directly. It lets non-SSH clients (the etcd client, TLS end to end) reach members
// that only the bastion can see. It fails with ErrDialerClosed after Close.
func (d *Dialer) DialTCP(ctx context.Context, addr string) (net.Conn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, ErrDialerClosed
	}
	b := d.cfg.Bastion
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if own, ok := d.cfg.BastionFor[host]; ok {
			b = own
		}
	}
	if b == nil {
		var nd net.Dialer
		return nd.DialContext(ctx, "tcp", addr)
	}
	bc, err := d.bastionClient(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("connect to %s via bastion: %w", addr, err)
	}
	nc, err := bc.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s via bastion: %w", addr, err)
	}
	return nc, nil
}

// HasBastion reports whether connections go through a bastion: spec.ssh.bastion's, or a host's own.
func (d *Dialer) HasBastion() bool { return d.cfg.Bastion != nil || len(d.cfg.BastionFor) > 0 }
