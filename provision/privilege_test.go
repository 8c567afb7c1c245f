package provision_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/provision/internal/sshtest"
)

// sudoEnv is a test host where the login user looks non-root (see
// sshtest.NewFakeUser).
func sudoEnv(t *testing.T, mode sshtest.SudoMode, password string) (*env, *sshtest.FakeUser) {
	t.Helper()
	fake := sshtest.NewFakeUser(t, mode, password)
	e := newEnv(t, sshtest.WithEnv(fake.Env...))
	e.trust()
	return e, fake
}

func (e *env) sudoConfig(password func() ([]byte, error)) provision.Config {
	cfg := e.config()
	cfg.User = "hactl"
	cfg.SudoPassword = password
	return cfg
}

func TestPrivilegeRoot(t *testing.T) {
	c := newEnv(t).dial()
	if c.Privilege() != provision.PrivilegeRoot {
		t.Errorf("Privilege() = %q, want root", c.Privilege())
	}
}

func TestPrivilegeSudoNoPassword(t *testing.T) {
	e, fake := sudoEnv(t, sshtest.SudoNoPassword, "")
	var asked atomic.Int32
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), e.sudoConfig(func() ([]byte, error) {
		asked.Add(1)
		return []byte("unused"), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Privilege() != provision.PrivilegeSudo {
		t.Fatalf("Privilege() = %q, want sudo", c.Privilege())
	}
	if asked.Load() != 0 {
		t.Error("sudo password asked although sudo needs none")
	}
	if c.Commands() != 1 || e.srv.Execs() != 1 {
		t.Errorf("connect ran %d commands (server saw %d), want 1", c.Commands(), e.srv.Execs())
	}
	res, err := c.Run(ctxTimeout(t, 5*time.Second), "s", `id -u; echo "$LC_ALL"; cat`, provision.WithStdin(strings.NewReader("in\n")))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "0\nC\nin\n" {
		t.Errorf("stdout %q, want uid 0, LC_ALL=C and the stdin", res.Stdout)
	}
	cmds := e.srv.Commands()
	if last := cmds[len(cmds)-1]; !strings.HasPrefix(last, "sudo -n -- env LC_ALL=C /bin/sh -c ") {
		t.Errorf("command line %q", last)
	}

	dir := t.TempDir()
	if err := c.Upload(ctxTimeout(t, 5*time.Second), "s", []provision.File{{Path: dir + "/f", Content: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if got := fake.SFTPRuns(t); len(got) != 1 || got[0] != "sudo=1" {
		t.Errorf("sftp-server runs %v, want one under sudo", got)
	}
}

const sudoPW = `pa ss'"$(w0rd)`

func TestPrivilegeSudoPassword(t *testing.T) {
	e, fake := sudoEnv(t, sshtest.SudoPassword, sudoPW)
	var asked atomic.Int32
	d, err := provision.NewDialer(e.sudoConfig(func() ([]byte, error) {
		asked.Add(1)
		return []byte(sudoPW), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var c *provision.Client
	for range 3 { // several hosts (here the same one): asked once
		c, err = d.Dial(ctxTimeout(t, 5*time.Second), e.target())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if asked.Load() != 1 {
		t.Errorf("sudo password asked %d times, want once", asked.Load())
	}
	if c.Privilege() != provision.PrivilegeSudoPassword {
		t.Fatalf("Privilege() = %q, want sudo-password", c.Privilege())
	}

	// The password line is consumed by sudo, not seen by the command.
	res, err := c.Run(ctxTimeout(t, 5*time.Second), "s", "id -u; cat", provision.WithStdin(strings.NewReader("line1\nline2\n")))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "0\nline1\nline2\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	res, err = c.Run(ctxTimeout(t, 5*time.Second), "s", "cat")
	if err != nil || len(res.Stdout) != 0 {
		t.Errorf("cat without stdin: %q, %v", res.Stdout, err)
	}

	// Should the password reach stderr, it is scrubbed, there and in errors.
	_, err = c.Run(ctxTimeout(t, 5*time.Second), "leak", "cat >&2; exit 1", provision.WithStdin(strings.NewReader(sudoPW+"\n")))
	var ce *provision.CommandError
	if !errors.As(err, &ce) || ce.Stderr != "[sudo password]" || strings.Contains(err.Error(), sudoPW) {
		t.Errorf("err = %v, want stderr scrubbed", err)
	}

	dir := t.TempDir()
	content := []byte("secret key material\n")
	if err := c.Upload(ctxTimeout(t, 5*time.Second), "s", []provision.File{{Path: dir + "/k", Content: content, Mode: 0o600}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dir + "/k"); string(got) != string(content) {
		t.Errorf("uploaded %q", got)
	}
	if got := fake.SFTPRuns(t); len(got) != 1 || got[0] != "sudo=1" {
		t.Errorf("sftp-server runs %v, want one under sudo", got)
	}

	// Never on a command line: not in the exec requests, not in sudo's argv.
	for _, cmd := range e.srv.Commands() {
		if strings.Contains(cmd, "w0rd") {
			t.Errorf("password on the command line %q", cmd)
		}
	}
	calls := fake.SudoCalls(t)
	if len(calls) < 3 {
		t.Fatalf("sudo ran %d times", len(calls))
	}
	sawS := false
	for _, argv := range calls {
		joined := strings.Join(argv, " ")
		if strings.Contains(joined, "w0rd") {
			t.Errorf("password in sudo's argv %q", argv)
		}
		sawS = sawS || strings.HasPrefix(joined, "-k -S -p  -- env LC_ALL=C /bin/sh -c ")
	}
	if !sawS {
		t.Errorf("no 'sudo -k -S -p '' --' call among %q", calls)
	}
}

func TestPrivilegeSudoWrongPassword(t *testing.T) {
	e, _ := sudoEnv(t, sshtest.SudoPassword, sudoPW)
	start := time.Now()
	_, err := provision.Dial(ctxTimeout(t, 10*time.Second), e.target(), e.sudoConfig(func() ([]byte, error) {
		return []byte("not-" + sudoPW), nil
	}))
	var pe *provision.PrivilegeError
	if !errors.As(err, &pe) || pe.Host != "h1" || pe.User != "hactl" {
		t.Fatalf("err = %v, want *PrivilegeError", err)
	}
	if !strings.Contains(err.Error(), "incorrect password") || strings.Contains(err.Error(), "w0rd") {
		t.Errorf("err = %v, want sudo's verdict and no password", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestPrivilegeSudoPasswordMissing(t *testing.T) {
	e, _ := sudoEnv(t, sshtest.SudoPassword, sudoPW)
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), e.sudoConfig(nil))
	var pe *provision.PrivilegeError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "asks for a password and none was provided") ||
		!strings.Contains(err.Error(), "spec.ssh.sudo.passwordEnv") {
		t.Errorf("err = %v", err)
	}

	errUnset := errors.New("HACTL_SUDO_PASSWORD is not set")
	_, err = provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), e.sudoConfig(func() ([]byte, error) { return nil, errUnset }))
	if !errors.As(err, &pe) || !errors.Is(err, errUnset) {
		t.Errorf("err = %v, want a *PrivilegeError wrapping the callback's error", err)
	}
}

func TestPrivilegeSlowPasswordPromptIsNotATimeout(t *testing.T) {
	// A terminal prompt takes as long as the user: it must not count
	// against the probe's timeout.
	e, _ := sudoEnv(t, sshtest.SudoPassword, sudoPW)
	cfg := e.sudoConfig(func() ([]byte, error) {
		time.Sleep(600 * time.Millisecond)
		return []byte(sudoPW), nil
	})
	cfg.ConnectTimeout = 300 * time.Millisecond
	c, err := provision.Dial(ctxTimeout(t, 10*time.Second), e.target(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestPrivilegeNoSudo(t *testing.T) {
	e, _ := sudoEnv(t, sshtest.NoSudo, "")
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), e.sudoConfig(nil))
	var pe *provision.PrivilegeError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "sudo is not installed") {
		t.Errorf("err = %v, want a *PrivilegeError saying sudo is missing", err)
	}
	if !strings.HasPrefix(err.Error(), "host h1: user hactl is not root") {
		t.Errorf("err = %v", err)
	}
}

func TestUploadWithoutSFTPServer(t *testing.T) {
	// A non-root user on a host without sftp-server: uploads say so.
	fake := sshtest.NewFakeUser(t, sshtest.SudoNoPassword, "")
	if err := os.Remove(filepath.Join(fake.Dir, "sftp-server")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server", "/usr/libexec/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists on this machine", p)
		}
	}
	if p, err := exec.LookPath("sftp-server"); err == nil {
		t.Skipf("%s is on PATH", p)
	}
	e := newEnv(t, sshtest.WithEnv(fake.Env...))
	e.trust()
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), e.target(), e.sudoConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Upload(context.Background(), "s", []provision.File{{Path: t.TempDir() + "/f", Content: []byte("x")}})
	if !errors.Is(err, provision.ErrNoSFTPServer) {
		t.Errorf("err = %v, want ErrNoSFTPServer", err)
	}
}

func TestPrivilegeProbeTimeout(t *testing.T) {
	fake := sshtest.NewFakeUser(t, sshtest.SudoNoPassword, "")
	if err := os.WriteFile(filepath.Join(fake.Dir, "id"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, sshtest.WithEnv(fake.Env...))
	e.trust()
	cfg := e.sudoConfig(nil)
	cfg.ConnectTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := provision.Dial(context.Background(), e.target(), cfg)
	var ce *provision.CommandError
	if !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "privilege probe timed out") {
		t.Errorf("err = %v, want the probe's timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}
