package provision_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/provision/internal/sshtest"
)

func TestDialUnknownHostKeyRefused(t *testing.T) {
	e := newEnv(t)
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), e.config())
	var hk *provision.HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("err = %v (%T), want *HostKeyError", err, err)
	}
	if hk.Changed() || hk.Host != "h1" || hk.Address != e.hostPort() {
		t.Errorf("HostKeyError = %+v", hk)
	}
	fp := ssh.FingerprintSHA256(e.srv.HostKey.Public())
	for _, want := range []string{"host h1", "unknown", fp, "--accept-new-host-keys",
		fmt.Sprintf("ssh-keyscan -p %d -t ed25519 %s", e.srv.Port, e.srv.Host)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, err := os.Stat(e.known); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("known_hosts file touched without --accept-new-host-keys: %v", err)
	}
}

func TestDialAcceptNewHostKey(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.AcceptNewHostKeys = true
	var told []string
	cfg.OnNewHostKey = func(host, hostPort, fingerprint string) { told = append(told, host+" "+hostPort+" "+fingerprint) }
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if want := fmt.Sprintf("%s 127.0.0.1:%d %s", e.target().Name, e.srv.Port, ssh.FingerprintSHA256(e.srv.HostKey.Public())); len(told) != 1 || told[0] != want {
		t.Errorf("OnNewHostKey told %q, want [%q]", told, want)
	}
	fi, err := os.Stat(e.known)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts mode %v, want 0600", fi.Mode().Perm())
	}
	want := knownhosts.Line([]string{e.hostPort()}, e.srv.HostKey.Public()) + "\n"
	if !strings.HasPrefix(want, fmt.Sprintf("[127.0.0.1]:%d ssh-ed25519 ", e.srv.Port)) {
		t.Fatalf("unexpected known_hosts form %q", want)
	}
	got, _ := os.ReadFile(e.known)
	if string(got) != want {
		t.Errorf("known_hosts = %q, want %q", got, want)
	}

	// Redial without the flag: now known.
	c, err = provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), e.config())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if again, _ := os.ReadFile(e.known); string(again) != want {
		t.Errorf("known_hosts changed on redial: %q", again)
	}
}

func TestDialAcceptNewHostKeyParallel(t *testing.T) {
	// Several hosts sharing one known_hosts file, each dialled several
	// times at once: one well-formed line per host.
	key := sshtest.NewKey(t)
	dir := t.TempDir()
	keyFile := key.WriteKeyFile(t, dir, "id", 0o600)
	known := dir + "/sub/known_hosts" // parent created too
	// A pre-existing file without a trailing newline.
	var servers []*sshtest.Server
	for range 4 {
		servers = append(servers, sshtest.New(t, key.Public()))
	}
	cfg := provision.Config{User: "root", IdentityFile: keyFile, KnownHostsFile: known, AcceptNewHostKeys: true, ConnectTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for _, s := range servers {
		for range 5 {
			wg.Go(func() {
				c, err := provision.Dial(context.Background(), provision.Target{Name: "h", Address: s.Host, Port: s.Port}, cfg)
				if err != nil {
					errs <- err
					return
				}
				c.Close()
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, _ := os.ReadFile(known)
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != len(servers) {
		t.Fatalf("known_hosts has %d lines, want %d:\n%s", len(lines), len(servers), got)
	}
	for _, s := range servers {
		want := knownhosts.Line([]string{knownhostsAddr(s.Host, s.Port)}, s.HostKey.Public())
		if !strings.Contains(string(got), want+"\n") {
			t.Errorf("known_hosts lacks %q", want)
		}
	}
}

func TestDialAppendsAfterFileWithoutTrailingNewline(t *testing.T) {
	e := newEnv(t)
	other := sshtest.NewKey(t)
	first := knownhosts.Line([]string{"10.9.9.9"}, other.Public())
	if err := os.WriteFile(e.known, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.AcceptNewHostKeys = true
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	got, _ := os.ReadFile(e.known)
	want := first + "\n" + knownhosts.Line([]string{e.hostPort()}, e.srv.HostKey.Public()) + "\n"
	if string(got) != want {
		t.Errorf("known_hosts = %q, want %q", got, want)
	}
}

func TestDialChangedHostKeyRefused(t *testing.T) {
	e := newEnv(t)
	old := sshtest.NewKey(t)
	content := "# managed by hand\n" + knownhosts.Line([]string{e.hostPort()}, old.Public()) + "\n"
	if err := os.WriteFile(e.known, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []bool{false, true} {
		cfg := e.config()
		cfg.AcceptNewHostKeys = accept
		_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
		var hk *provision.HostKeyError
		if !errors.As(err, &hk) || !hk.Changed() {
			t.Fatalf("accept=%v: err = %v, want a changed *HostKeyError", accept, err)
		}
		if len(hk.Known) != 1 || hk.Known[0].Line != 2 {
			t.Errorf("Known = %+v, want line 2", hk.Known)
		}
		for _, want := range []string{"CHANGED", e.known + ":2", ssh.FingerprintSHA256(old.Public()),
			ssh.FingerprintSHA256(e.srv.HostKey.Public()),
			// The fix as a pasteable command: "[127.0.0.1]:port" quoted for the shell.
			"(" + shell.Join("ssh-keygen", "-R", hk.Address, "-f", e.known) + ")"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
		if got, _ := os.ReadFile(e.known); string(got) != content {
			t.Errorf("accept=%v: known_hosts modified: %q", accept, got)
		}
	}
}

func TestDialIPv6(t *testing.T) {
	key := sshtest.NewKey(t)
	dir := t.TempDir()
	s := sshtest.New(t, key.Public(), sshtest.ListenOn("[::1]:0")) // skips without IPv6
	cfg := provision.Config{User: "root", IdentityFile: key.WriteKeyFile(t, dir, "id", 0o600),
		KnownHostsFile: dir + "/known_hosts", AcceptNewHostKeys: true}
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), provision.Target{Name: "v6", Address: "::1", Port: s.Port}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, _ := os.ReadFile(cfg.KnownHostsFile)
	if want := fmt.Sprintf("[::1]:%d ssh-ed25519 ", s.Port); !strings.HasPrefix(string(got), want) {
		t.Errorf("known_hosts = %q, want prefix %q", got, want)
	}
	if _, err := c.Run(ctxTimeout(t, 5*time.Second), "v6", "true"); err != nil {
		t.Fatal(err)
	}
}

func TestDialIdentityFilePermissions(t *testing.T) {
	for _, tt := range []struct {
		perm os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o644, false}, {0o640, false}, {0o604, false}} {
		t.Run(fmt.Sprintf("%04o", tt.perm), func(t *testing.T) {
			e := newEnv(t)
			e.trust()
			cfg := e.config()
			cfg.IdentityFile = e.key.WriteKeyFile(t, e.dir, "key", tt.perm)
			c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				return
			}
			if !errors.Is(err, provision.ErrUnprotectedKey) {
				t.Fatalf("err = %v, want ErrUnprotectedKey", err)
			}
			for _, want := range []string{fmt.Sprintf("%04o", tt.perm), "0600", cfg.IdentityFile} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if e.srv.Conns() != 0 {
				t.Error("connected although the key was refused")
			}
		})
	}
}

func TestDialWrongKey(t *testing.T) {
	e := newEnv(t)
	e.trust()
	cfg := e.config()
	cfg.IdentityFile = sshtest.NewKey(t).WriteKeyFile(t, e.dir, "other", 0o600)
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), cfg)
	if err == nil || !strings.Contains(err.Error(), "authorized_keys") {
		t.Fatalf("err = %v", err)
	}
}

// silentListener accepts TCP connections and never speaks SSH.
func silentListener(t *testing.T) *net.TCPAddr {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().(*net.TCPAddr)
}

func TestDialTimeoutAndCancel(t *testing.T) {
	e := newEnv(t)
	addr := silentListener(t)
	target := provision.Target{Name: "mute", Address: "127.0.0.1", Port: addr.Port}

	cfg := e.config()
	cfg.ConnectTimeout = 200 * time.Millisecond
	start := time.Now()
	_, err := provision.Dial(context.Background(), target, cfg)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v, want a timeout", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("timeout took %v", time.Since(start))
	}

	cfg.ConnectTimeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, err = provision.Dial(ctx, target, cfg)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("err = %v, want cancellation", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("cancel took %v", time.Since(start))
	}
}

func TestDialInvalidInput(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct {
		target provision.Target
		cfg    func(*provision.Config)
	}{
		"hostname":      {provision.Target{Name: "x", Address: "example.com"}, nil},
		"port":          {provision.Target{Name: "x", Address: "127.0.0.1", Port: 70000}, nil},
		"no user":       {e.target(), func(c *provision.Config) { c.User = "" }},
		"no known file": {e.target(), func(c *provision.Config) { c.KnownHostsFile = "" }},
	} {
		cfg := e.config()
		if tc.cfg != nil {
			tc.cfg(&cfg)
		}
		if _, err := provision.Dial(context.Background(), tc.target, cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
