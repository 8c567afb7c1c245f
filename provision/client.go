package provision

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrUnprotectedKey is wrapped by the error [Dial] returns when the identity
// file is accessible by group or others. Like OpenSSH ("UNPROTECTED PRIVATE
// KEY FILE"), hactl refuses such keys: they must be mode 0600 (or 0400).
var ErrUnprotectedKey = errors.New("private key is accessible by group or others; keys must be mode 0600")

// Client is an SSH connection to one host. All steps for the host reuse it;
// it is safe for concurrent use. Close it when done.
type Client struct {
	target Target
	user   string
	conn   *ssh.Client

	commands atomic.Int64

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu     sync.Mutex
	broken error // why the keepalive closed the connection, if it did
}

// Dial connects to t, verifies its host key against cfg.KnownHostsFile and
// authenticates as cfg.User with the key in cfg.IdentityFile.
//
// ctx and cfg.ConnectTimeout bound the TCP connect, the SSH handshake and
// authentication; after Dial returns, ctx no longer affects the connection.
// The connection sends keepalives (cfg.KeepAliveInterval) and is closed when
// the host stops answering them.
//
// Errors (all prefixed with the host): invalid target or config; an identity
// file that is unreadable, encrypted or not a private key, or wraps
// [ErrUnprotectedKey] when its mode allows group/other access; a
// [*HostKeyError] for an unknown host (without cfg.AcceptNewHostKeys) or a
// changed host key; authentication failures; network errors; and on
// cancellation or timeout an error wrapping context.Canceled or
// context.DeadlineExceeded.
func Dial(ctx context.Context, t Target, cfg Config) (*Client, error) {
	hostPort, err := t.hostPort()
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", t.Name, err)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("host %s: connect to %s: "+format, append([]any{t.Name, hostPort}, args...)...)
	}
	if err := cfg.validate(); err != nil {
		return nil, fail("%w", err)
	}
	signer, err := loadIdentity(cfg.IdentityFile)
	if err != nil {
		return nil, fail("%w", err)
	}

	dctx := ctx
	if cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
		defer cancel()
	}
	ctxErr := func(err error) error {
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			return fail("cancelled: %w (%v)", context.Cause(ctx), err)
		case ctx.Err() == nil && cfg.ConnectTimeout > 0:
			return fail("timed out after %s (connect timeout): %w (%v)", cfg.ConnectTimeout, context.DeadlineExceeded, err)
		default:
			return fail("timed out: %w (%v)", context.DeadlineExceeded, err)
		}
	}

	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", hostPort)
	if err != nil {
		if dctx.Err() != nil {
			return nil, ctxErr(err)
		}
		return nil, fail("%w", err)
	}
	// Handshake and auth are blocking reads/writes on nc: bound them by the
	// deadline and unblock them on cancellation.
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(dctx, func() { _ = nc.SetDeadline(time.Now()) })

	checker := &hostKeyChecker{target: t, port: portOf(hostPort), file: cfg.KnownHostsFile, accept: cfg.AcceptNewHostKeys}
	algos, err := checker.hostKeyAlgorithms(hostPort, nc.RemoteAddr())
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
		User: cfg.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			err := checker.check(hostname, remote, key)
			hkMu.Lock()
			hkResult = err
			hkMu.Unlock()
			return err
		},
		HostKeyAlgorithms: algos,
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, hostPort, sshCfg)
	interrupted := !stop()
	hkMu.Lock()
	hostKeyErr := hkResult
	hkMu.Unlock()
	if err != nil || interrupted {
		if sc != nil {
			sc.Close()
		}
		nc.Close()
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
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fail("%w (is the public key of %s in ~%s/.ssh/authorized_keys on the host?)", err, cfg.IdentityFile, cfg.User)
		default:
			return nil, fail("%w", err)
		}
	}
	_ = nc.SetDeadline(time.Time{})

	c := &Client{
		target: t,
		user:   cfg.User,
		conn:   ssh.NewClient(sc, chans, reqs),
		done:   make(chan struct{}),
	}
	interval := cfg.KeepAliveInterval
	if interval == 0 {
		interval = DefaultKeepAliveInterval
	}
	if interval > 0 {
		c.wg.Add(1)
		go c.keepAlive(interval)
	}
	return c, nil
}

// loadIdentity reads an unencrypted private key, refusing files that group or
// others can access.
func loadIdentity(file string) (ssh.Signer, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("identity file %s has mode %04o: %w (run: chmod 0600 %s)", file, perm, ErrUnprotectedKey, file)
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("identity file %s is encrypted with a passphrase, which hactl does not support: %w", file, err)
		}
		return nil, fmt.Errorf("identity file %s: %w", file, err)
	}
	return signer, nil
}

// keepAlive sends keepalive@openssh.com requests every interval and closes the
// connection when one is not answered within keepAliveCountMax intervals.
func (c *Client) keepAlive(interval time.Duration) {
	defer c.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		timeout := time.NewTimer(interval * keepAliveCountMax)
		var err error
		select {
		case <-c.done:
			timeout.Stop()
			return
		case err = <-reply:
		case <-timeout.C:
			err = fmt.Errorf("no keepalive reply for %s", interval*keepAliveCountMax)
		}
		timeout.Stop()
		if err != nil {
			c.mu.Lock()
			c.broken = fmt.Errorf("host %s stopped responding: %w", c.target.Name, err)
			c.mu.Unlock()
			c.conn.Close()
			return
		}
	}
}

// connErr adds the keepalive verdict, if any, to an error from the connection.
func (c *Client) connErr(err error) error {
	c.mu.Lock()
	broken := c.broken
	c.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("%w (connection closed: %v)", err, broken)
	}
	return err
}

// Target returns the host this client is connected to.
func (c *Client) Target() Target { return c.target }

// Commands returns the number of remote commands (exec sessions) started on
// this client so far, including those run by Upload.
func (c *Client) Commands() int { return int(c.commands.Load()) }

// Close closes the connection; running commands fail. It is safe to call more
// than once; later calls return nil.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.done)
		err = c.conn.Close()
		c.wg.Wait()
		if errors.Is(err, net.ErrClosed) {
			err = nil // already closed by the keepalive
		}
		if err != nil {
			err = fmt.Errorf("host %s: close connection: %w", c.target.Name, err)
		}
	})
	return err
}
