package provision_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/provision/internal/sshtest"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestMain(m *testing.M) {
	sshtest.MainSFTPServer() // the fake sftp-server of sshtest.NewFakeUser
	// The developer's agent must not take part: tests that want an agent
	// start one (sshtest.NewAgent) and name its socket.
	os.Unsetenv("SSH_AUTH_SOCK")
	os.Exit(m.Run())
}

// env is one test host: a test sshd, a client key and a known_hosts path.
type env struct {
	t       *testing.T
	dir     string
	key     sshtest.Key
	keyFile string
	known   string
	srv     *sshtest.Server
}

func newEnv(t *testing.T, opts ...sshtest.Option) *env {
	t.Helper()
	dir := t.TempDir()
	key := sshtest.NewKey(t)
	e := &env{
		t:       t,
		dir:     dir,
		key:     key,
		keyFile: key.WriteKeyFile(t, dir, "id_ed25519", 0o600),
		known:   filepath.Join(dir, "known_hosts"),
	}
	e.srv = sshtest.New(t, key.Public(), opts...)
	return e
}

func (e *env) target() provision.Target {
	return provision.Target{Name: "h1", Address: e.srv.Host, Port: e.srv.Port}
}

func (e *env) config() provision.Config {
	return provision.Config{
		User:           "root",
		IdentityFile:   e.keyFile,
		KnownHostsFile: e.known,
		ConnectTimeout: 5 * time.Second,
	}
}

// hostPort is the server's address as the client dials it.
func (e *env) hostPort() string {
	return knownhostsAddr(e.srv.Host, e.srv.Port)
}

func knownhostsAddr(host string, port int) string {
	return knownhosts.Normalize("[" + host + "]:" + strconv.Itoa(port))
}

// trust writes a known_hosts file holding the server's key.
func (e *env) trust() {
	e.t.Helper()
	line := knownhosts.Line([]string{e.hostPort()}, e.srv.HostKey.Public()) + "\n"
	if err := os.WriteFile(e.known, []byte(line), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// dial connects with a trusted host key and closes the client at the end.
func (e *env) dial() *provision.Client {
	e.t.Helper()
	e.trust()
	c, err := provision.Dial(context.Background(), e.target(), e.config())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
