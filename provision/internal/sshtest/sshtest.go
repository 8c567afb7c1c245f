// Package sshtest is an in-process SSH server for provision's tests. It
// accepts given public keys, runs "exec" requests with the local /bin/sh (as
// the test's user, in its own process group, with extra environment if
// asked), honours the "signal" request, serves the "sftp" subsystem with
// github.com/pkg/sftp and, when enabled, forwards "direct-tcpip" channels (a
// bastion). Helpers simulate a non-root login with a fake sudo ([NewFakeUser])
// and run an ssh-agent ([NewAgent]).
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
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Key is a generated ed25519 key pair.
type Key struct {
	Signer ssh.Signer
	// PEM is the OpenSSH private key file content.
	PEM []byte
	// Private is the private key.
	Private ed25519.PrivateKey
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
	return Key{Signer: signer, PEM: pem.EncodeToMemory(block), Private: priv}
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

	ln       net.Listener
	cfg      *ssh.ServerConfig
	opts     options
	frozen   atomic.Bool
	closed   chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn // accepted
	outbound []net.Conn // dialled for direct-tcpip
	execs    atomic.Int64
	active   atomic.Int64 // SSH connections being served
	commands []string     // exec command lines, in order
	offered  []string     // fingerprints of the public keys offered, in order
	users    []string     // user names that authenticated
	forwards []string     // direct-tcpip destinations requested
}

// Option configures New.
type Option func(*options)

type options struct {
	listen     string
	hostKey    *Key
	authorized []ssh.PublicKey
	env        []string
	forwarding bool
	rewrite    map[string]string
}

// Authorize accepts more client keys.
func Authorize(keys ...ssh.PublicKey) Option {
	return func(o *options) { o.authorized = append(o.authorized, keys...) }
}

// WithEnv adds "NAME=value" entries to the environment of exec'd commands
// (later entries win, so "PATH=..." replaces the test's PATH).
func WithEnv(env ...string) Option { return func(o *options) { o.env = append(o.env, env...) } }

// WithForwarding makes the server forward direct-tcpip channels (a bastion).
// rewrite maps a requested "host:port" (as net.JoinHostPort writes it) to the
// address actually dialled, so a test can name a target that only the
// bastion can reach; other destinations are dialled as requested.
func WithForwarding(rewrite map[string]string) Option {
	return func(o *options) { o.forwarding, o.rewrite = true, rewrite }
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
	o.authorized = append([]ssh.PublicKey{authorized}, o.authorized...)
	s := &Server{HostKey: hk, opts: o, closed: make(chan struct{})}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(md ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.mu.Lock()
			s.offered = append(s.offered, ssh.FingerprintSHA256(key))
			s.mu.Unlock()
			for _, a := range o.authorized {
				if string(key.Marshal()) == string(a.Marshal()) {
					s.mu.Lock()
					s.users = append(s.users, md.User())
					s.mu.Unlock()
					return &ssh.Permissions{}, nil
				}
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
	s.Host, s.Port, s.ln, s.cfg = addr.IP.String(), addr.Port, ln, cfg
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Execs returns the number of exec requests served.
func (s *Server) Execs() int { return int(s.execs.Load()) }

// Commands returns the command lines of the exec requests served, in order.
func (s *Server) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// Offered returns the SHA256 fingerprints of the public keys clients offered,
// in order (each key once per connection).
func (s *Server) Offered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.offered...)
}

// Users returns the user names of the successful logins, in order.
func (s *Server) Users() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.users...)
}

// Forwards returns the direct-tcpip destinations requested ("host:port"), in
// order.
func (s *Server) Forwards() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.forwards...)
}

// track registers a connection for Close; false when the server is closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
		return false
	default:
	}
	s.outbound = append(s.outbound, c)
	return true
}

// Conns returns the number of TCP connections accepted.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Active returns the number of connections currently open (being served).
func (s *Server) Active() int { return int(s.active.Load()) }

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
		for _, c := range s.outbound {
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
	s.active.Add(1)
	defer s.active.Add(-1)
	defer nc.Close()
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs) // keepalives get "false", which still proves liveness
	var wg sync.WaitGroup
	for nch := range chans {
		if nch.ChannelType() == "direct-tcpip" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.forward(nch)
			}()
			continue
		}
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
			s.mu.Lock()
			s.commands = append(s.commands, p.Command)
			s.mu.Unlock()
			c := exec.Command("/bin/sh", "-c", p.Command)
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if len(s.opts.env) > 0 {
				c.Env = append(os.Environ(), s.opts.env...)
			}
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

// forward serves one direct-tcpip channel (RFC 4254 7.2).
func (s *Server) forward(nch ssh.NewChannel) {
	var p struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nch.ExtraData(), &p); err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	dest := net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port)))
	s.mu.Lock()
	s.forwards = append(s.forwards, dest)
	s.mu.Unlock()
	if !s.opts.forwarding {
		_ = nch.Reject(ssh.Prohibited, "forwarding is disabled")
		return
	}
	if to, ok := s.opts.rewrite[dest]; ok {
		dest = to
	}
	nc, err := net.DialTimeout("tcp", dest, 5*time.Second)
	if err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	if !s.track(nc) {
		nc.Close()
		_ = nch.Reject(ssh.ConnectionFailed, "server closed")
		return
	}
	ch, reqs, err := nch.Accept()
	if err != nil {
		nc.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(nc, ch)
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(ch, nc)
	_ = ch.CloseWrite()
	<-done
	_ = ch.Close()
	nc.Close()
}
