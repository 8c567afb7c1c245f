// Package sshtest is an in-process SSH server for provision's tests. It
// accepts one public key, runs "exec" requests with the local /bin/sh (as the
// test's user, in its own process group), honours the "signal" request, and
// serves the "sftp" subsystem with github.com/pkg/sftp.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Key is a generated ed25519 key pair.
type Key struct {
	Signer ssh.Signer
	// PEM is the OpenSSH private key file content.
	PEM []byte
}

// Public returns the public key.
func (k Key) Public() ssh.PublicKey { return k.Signer.PublicKey() }

// NewKey generates an ed25519 key pair.
func NewKey(t testing.TB) Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return Key{Signer: signer, PEM: pem.EncodeToMemory(block)}
}

// WriteKeyFile writes k's private key to dir/name with mode perm and returns
// the path.
func (k Key) WriteKeyFile(t testing.TB, dir, name string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, k.PEM, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // WriteFile is subject to umask
		t.Fatal(err)
	}
	return p
}

// Server is a running test SSH server.
type Server struct {
	// Host and Port are where it listens.
	Host string
	Port int
	// HostKey is the server's host key.
	HostKey Key

	ln     net.Listener
	cfg    *ssh.ServerConfig
	frozen atomic.Bool
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	execs  atomic.Int64
}

// Option configures New.
type Option func(*options)

type options struct {
	listen  string
	hostKey *Key
}

// ListenOn makes the server listen on addr (default "127.0.0.1:0").
func ListenOn(addr string) Option { return func(o *options) { o.listen = addr } }

// WithHostKey sets the server's host key (default: a new ed25519 key).
func WithHostKey(k Key) Option { return func(o *options) { o.hostKey = &k } }

// New starts a server that accepts the client key authorized. It is closed
// when the test ends.
func New(t testing.TB, authorized ssh.PublicKey, opts ...Option) *Server {
	t.Helper()
	o := options{listen: "127.0.0.1:0"}
	for _, opt := range opts {
		opt(&o)
	}
	hk := NewKey(t)
	if o.hostKey != nil {
		hk = *o.hostKey
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) == string(authorized.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("unknown public key")
		},
	}
	cfg.AddHostKey(hk.Signer)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		t.Skipf("listen on %s: %v", o.listen, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	s := &Server{
		Host:    addr.IP.String(),
		Port:    addr.Port,
		HostKey: hk,
		ln:      ln,
		cfg:     cfg,
		closed:  make(chan struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Execs returns the number of exec requests served.
func (s *Server) Execs() int { return int(s.execs.Load()) }

// Conns returns the number of TCP connections accepted.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Freeze makes the server stop reading and writing on all connections, like
// a host that vanished from the network without closing TCP.
func (s *Server) Freeze() { s.frozen.Store(true) }

// Close stops the server, closing every connection.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		fc := &freezableConn{Conn: nc, s: s}
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			nc.Close()
			return
		default:
		}
		s.conns = append(s.conns, fc)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(fc)
	}
}

// freezableConn blocks all I/O while the server is frozen, until it closes.
type freezableConn struct {
	net.Conn
	s *Server
}

func (c *freezableConn) Read(p []byte) (int, error) {
	if c.s.frozen.Load() {
		<-c.s.closed
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p)
	if c.s.frozen.Load() {
		<-c.s.closed // drop what arrived after the freeze
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *freezableConn) Write(p []byte) (int, error) {
	if c.s.frozen.Load() {
		<-c.s.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs) // keepalives get "false", which still proves liveness
	var wg sync.WaitGroup
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nch.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveSession(ch, chReqs)
		}()
	}
	wg.Wait()
}

// serveSession handles one session channel: exec or sftp, plus signals.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var (
		mu  sync.Mutex
		cmd *exec.Cmd
	)
	kill := func(sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if cmd != nil && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, sig) // the whole process group
		}
	}
	exited := make(chan struct{})
	for req := range reqs {
		switch req.Type {
		case "exec":
			var p struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			c := exec.Command("/bin/sh", "-c", p.Command)
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			c.Stdout = ch
			c.Stderr = ch.Stderr()
			stdin, err := c.StdinPipe()
			if err == nil {
				err = c.Start()
			}
			if err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			s.execs.Add(1)
			mu.Lock()
			cmd = c
			mu.Unlock()
			_ = req.Reply(true, nil)
			go func() {
				_, _ = io.Copy(stdin, ch)
				_ = stdin.Close()
			}()
			go func() {
				defer close(exited)
				err := c.Wait()
				sendExit(ch, c.ProcessState, err)
				_ = ch.Close()
			}()
		case "subsystem":
			var p struct{ Name string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil || p.Name != "sftp" {
				_ = req.Reply(false, nil)
				continue
			}
			srv, err := sftp.NewServer(ch)
			if err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			go func() {
				defer close(exited)
				_ = srv.Serve()
				_ = srv.Close()
				_ = ch.Close()
			}()
		case "signal":
			var p struct{ Signal string }
			if err := ssh.Unmarshal(req.Payload, &p); err == nil {
				if sig, ok := signals[p.Signal]; ok {
					kill(sig)
				}
			}
			if req.WantReply {
				_ = req.Reply(true, nil)
			}
		default:
			if req.WantReply {
				_ = req.Reply(false, nil) // env, pty-req, shell...
			}
		}
	}
	// The client closed the channel: don't leave the command running.
	kill(syscall.SIGKILL)
	mu.Lock()
	started := cmd != nil
	mu.Unlock()
	if started {
		<-exited
	}
}

var signals = map[string]syscall.Signal{
	"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
}

func sendExit(ch ssh.Channel, ps *os.ProcessState, err error) {
	if ps == nil {
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{255}))
		return
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := "KILL"
		for n, s := range signals {
			if s == ws.Signal() {
				name = n
			}
		}
		_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{name, false, "", ""}))
		return
	}
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(ps.ExitCode())}))
}
