package provision

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// Client is an SSH connection to one host. All steps for the host reuse it;
// it is safe for concurrent use. Close it when done.
type Client struct {
	target Target
	user   string
	conn   *ssh.Client

	// Set by the probe at connect time, read-only afterwards.
	priv       Privilege
	sftpServer string // absolute path of the host's sftp-server, "" if none found
	host       HostInfo
	password   []byte // sudo password (PrivilegeSudoPassword), shared with the Dialer

	commands atomic.Int64

	release   func() error // drops the client's reference on its Dialer
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu     sync.Mutex
	broken error // why the keepalive closed the connection, if it did
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

// DialContext opens a TCP connection to addr ("host:port") as the host itself sees it: an SSH
// direct-tcpip channel, like `ssh -L` (the server's AllowTcpForwarding must allow it). addr
// "127.0.0.1:2379" reaches a service on the host's loopback, past any firewall rule on its other
// interfaces (drills watch a partitioned etcd leader this way).
func (c *Client) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	nc, err := c.conn.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: connect to %s through SSH: %w", c.target.Name, addr, err)
	}
	return nc, nil
}

// Target returns the host this client is connected to.
func (c *Client) Target() Target { return c.target }

// Commands returns the number of remote commands (exec sessions) started on
// this client so far, including those run by Upload.
func (c *Client) Commands() int { return int(c.commands.Load()) }

// Host returns what the connect-time probe found about the host: kernel, architecture,
// os-release, systemd, package manager (one command with the privilege probe, no extra round trip).
func (c *Client) Host() HostInfo { return c.host }

// Privilege returns how the client runs commands as root, as detected when it
// connected: PrivilegeRoot, PrivilegeSudo or PrivilegeSudoPassword.
func (c *Client) Privilege() Privilege { return c.priv }

// Close closes the connection; running commands fail. The last client of a
// closed [Dialer] also closes the bastion connection. It is safe to call more
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
		if c.release != nil {
			if rerr := c.release(); rerr != nil && err == nil {
				err = fmt.Errorf("host %s: %w", c.target.Name, rerr)
			}
		}
	})
	return err
}
