package lab

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// loadOrCreateKey returns the lab's SSH key pair from privPath (OpenSSH PEM) and privPath+".pub"
// (authorized_keys line), generating an ed25519 pair when either is missing or unreadable. The
// private key is kept at mode 0600.
func loadOrCreateKey(privPath string) (ssh.Signer, []byte, error) {
	pubPath := privPath + ".pub"
	if priv, err := os.ReadFile(privPath); err == nil {
		if pub, err := os.ReadFile(pubPath); err == nil {
			signer, serr := ssh.ParsePrivateKey(priv)
			parsed, _, _, _, perr := ssh.ParseAuthorizedKey(pub)
			if serr == nil && perr == nil && bytes.Equal(parsed.Marshal(), signer.PublicKey().Marshal()) {
				if err := os.Chmod(privPath, 0o600); err != nil {
					return nil, nil, fmt.Errorf("lab key: %w", err)
				}
				return signer, pub, nil
			}
		}
	}
	pubKey, privKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("lab key: generate ed25519: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(privKey, "hactl-lab")
	if err != nil {
		return nil, nil, fmt.Errorf("lab key: marshal private key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pubKey)
	if err != nil {
		return nil, nil, fmt.Errorf("lab key: %w", err)
	}
	pub := append(bytes.TrimRight(ssh.MarshalAuthorizedKey(sshPub), "\n"), []byte(" hactl-lab\n")...)
	if err := writeFileAtomic(privPath, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, nil, fmt.Errorf("lab key: %w", err)
	}
	if err := writeFileAtomic(pubPath, pub, 0o644); err != nil {
		return nil, nil, fmt.Errorf("lab key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(privKey)
	if err != nil {
		return nil, nil, fmt.Errorf("lab key: %w", err)
	}
	return signer, pub, nil
}

// knownHostsLines turns a host's public host keys (the contents of /etc/ssh/ssh_host_*_key.pub)
// into known_hosts lines for address (port 22 is written as the bare address, as OpenSSH does).
func knownHostsLines(address string, port int, pubFiles string) ([]string, error) {
	var lines []string
	rest := []byte(pubFiles)
	for len(bytes.TrimSpace(rest)) > 0 {
		key, _, _, r, err := ssh.ParseAuthorizedKey(rest)
		if err != nil {
			return nil, fmt.Errorf("parse host key of %s: %w", address, err)
		}
		rest = r
		lines = append(lines, knownhosts.Line([]string{net.JoinHostPort(address, strconv.Itoa(port))}, key))
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("host %s has no host keys", address)
	}
	return lines, nil
}

// dialSSH logs in as root to address:22 with signer, verifying the host key against the
// known_hosts file (host-key checking is always on).
func dialSSH(ctx context.Context, address string, signer ssh.Signer, knownHostsPath string) (*ssh.Client, error) {
	return dialSSHAs(ctx, nil, address, "root", signer, knownHostsPath)
}

// dialSSHAs logs in as user to address:22 with signer, verifying the host key against the
// known_hosts file. With jump non-nil the TCP connection is opened through it (like OpenSSH's
// ProxyJump) and the returned client owns jump: closing the client closes jump too (also on error).
func dialSSHAs(ctx context.Context, jump *ssh.Client, address, user string, signer ssh.Signer, knownHostsPath string) (*ssh.Client, error) {
	closeJump := func() {
		if jump != nil {
			jump.Close()
		}
	}
	cb, err := knownhosts.New(knownHostsPath)
	if err != nil {
		closeJump()
		return nil, fmt.Errorf("ssh %s: load known_hosts: %w", address, err)
	}
	cfg := &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: cb,
		Timeout:         5 * time.Second,
	}
	addr := net.JoinHostPort(address, "22")
	dctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var conn net.Conn
	if jump != nil {
		c, err := jump.DialContext(dctx, "tcp", addr)
		if err != nil {
			closeJump()
			return nil, fmt.Errorf("ssh %s through %s: %w", addr, jump.RemoteAddr(), err)
		}
		conn = &jumpConn{Conn: c, jump: jump}
	} else if conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", addr); err != nil {
		return nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	// Bound the handshake by the context too (a tunnelled connection has no deadlines: close it).
	stop := context.AfterFunc(dctx, func() {
		if conn.SetDeadline(time.Now()) != nil {
			conn.Close()
		}
	})
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if !stop() {
		if err == nil {
			c.Close()
		}
		conn.Close()
		return nil, fmt.Errorf("ssh %s@%s: handshake: %w", user, addr, errors.Join(dctx.Err(), err))
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh %s@%s: %w", user, addr, err)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// jumpConn is a connection tunnelled through an SSH client that it owns.
type jumpConn struct {
	net.Conn
	jump *ssh.Client
}

func (c *jumpConn) Close() error {
	err := c.Conn.Close()
	c.jump.Close()
	return err
}

// sshRun runs cmd on client and returns its trimmed standard output.
//
// It does not return while the host stays silent: an established connection to a host that vanished
// (its container killed, its network gone) blocks its reads forever. Use sshRunContext to bound it.
func sshRun(client *ssh.Client, cmd string) (string, error) {
	s, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	if err := s.Run(cmd); err != nil {
		return "", fmt.Errorf("%q: %w: %s", cmd, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// sshRunContext is sshRun bounded by ctx: when ctx ends first it closes client (the only way to
// unblock a session whose host went silent) and returns ctx's error with the command.
func sshRunContext(ctx context.Context, client *ssh.Client, cmd string) (string, error) {
	stop := context.AfterFunc(ctx, func() { client.Close() })
	out, err := sshRun(client, cmd)
	if !stop() {
		return "", fmt.Errorf("%q: %w (connection closed)", cmd, context.Cause(ctx))
	}
	return out, err
}
