package sshtest

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh/agent"

	"github.com/hactl/hactl/internal/shell"
)

// sftpServerEnv marks a re-executed test binary that must act as sftp-server.
const sftpServerEnv = "SSHTEST_SFTP_SERVER"

// MainSFTPServer makes the test binary usable as the fake sftp-server of
// [NewFakeUser]: when the process was started as one, it serves SFTP on
// stdin/stdout and exits. Call it first in TestMain.
func MainSFTPServer() {
	if os.Getenv(sftpServerEnv) != "1" {
		return
	}
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{os.Stdin, os.Stdout})
	if err != nil {
		os.Exit(2)
	}
	if err := srv.Serve(); err != nil && err != io.EOF {
		os.Exit(1)
	}
	os.Exit(0)
}

// SudoMode is how the fake sudo of [NewFakeUser] behaves.
type SudoMode int

const (
	// NoSudo: sudo is not installed (PATH holds only the fake tools).
	NoSudo SudoMode = iota
	// SudoNoPassword: "sudo -n" works.
	SudoNoPassword
	// SudoPassword: "sudo -n" fails with "a password is required"; "sudo
	// -S" reads the password from stdin (up to 3 lines, like sudo).
	SudoPassword
)

// FakeUser simulates a non-root login on a test server (which really runs as
// the test's user): a directory of fake tools put first on the session's PATH
// with [WithEnv](f.Env...): "id" reports uid 1000 (0 under the fake sudo),
// "sudo" checks -n / -S and the password and then runs the command, and
// "sftp-server" is the test binary (see [MainSFTPServer]).
type FakeUser struct {
	// Dir holds the fake tools.
	Dir string
	// Env is the environment to give the server (PATH).
	Env []string

	sudoLog, sftpLog string
}

// NewFakeUser writes the fake tools for mode; password is what SudoPassword
// mode accepts.
func NewFakeUser(t testing.TB, mode SudoMode, password string) *FakeUser {
	t.Helper()
	dir := t.TempDir()
	f := &FakeUser{Dir: dir, sudoLog: filepath.Join(dir, "sudo.log"), sftpLog: filepath.Join(dir, "sftp.log")}
	realID, err := exec.LookPath("id")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("id", `#!/bin/sh
if [ "$SSHTEST_SUDO" = 1 ]; then exec `+shell.Quote(realID)+` "$@"; fi
case $1 in
-u) echo 1000 ;;
-un) echo hactl ;;
*) echo 'uid=1000(hactl) gid=1000(hactl) groups=1000(hactl)' ;;
esac
`)
	write("sftp-server", `#!/bin/sh
echo "sudo=${SSHTEST_SUDO:-0}" >> `+shell.Quote(f.sftpLog)+`
export `+sftpServerEnv+`=1
# A race-enabled binary sleeps 1 s at exit unless told not to.
export GORACE="${GORACE:+$GORACE }atexit_sleep_ms=0"
exec `+shell.Quote(self)+`
`)
	modeWord := map[SudoMode]string{SudoNoPassword: "nopasswd", SudoPassword: "password"}[mode]
	if mode != NoSudo {
		write("sudo", `#!/bin/sh
for a; do printf '%s\036' "$a"; done >> `+shell.Quote(f.sudoLog)+`
printf '\035' >> `+shell.Quote(f.sudoLog)+`
n=0 S=0
while [ $# -gt 0 ]; do
	case $1 in
	-n) n=1 ;;
	-S) S=1 ;;
	-k) ;;
	-p) shift ;;
	--) shift; break ;;
	-*) echo "sudo: unknown option $1" >&2; exit 1 ;;
	*) break ;;
	esac
	shift
done
if [ `+modeWord+` = password ]; then
	if [ $n = 1 ]; then echo "sudo: a password is required" >&2; exit 1; fi
	if [ $S = 0 ]; then echo "sudo: a terminal is required to read the password" >&2; exit 1; fi
	tries=0
	while :; do
		if ! IFS= read -r pw; then
			if [ $tries -gt 0 ]; then echo "sudo: $tries incorrect password attempt" >&2
			else echo "sudo: no password was provided" >&2; fi
			exit 1
		fi
		[ "$pw" = `+shell.Quote(password)+` ] && break
		tries=$((tries+1))
		echo "Sorry, try again." >&2
		if [ $tries -ge 3 ]; then echo "sudo: 3 incorrect password attempts" >&2; exit 1; fi
	done
fi
export SSHTEST_SUDO=1
exec "$@"
`)
	}
	path := dir + string(os.PathListSeparator) + os.Getenv("PATH")
	if mode == NoSudo {
		// Only the fake tools, and the few real ones the probe needs,
		// so a real sudo elsewhere on PATH is not found.
		path = dir
		for _, tool := range []string{"env", "cat", "true"} {
			p, err := exec.LookPath(tool)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.Env = []string{"PATH=" + path}
	return f
}

// SudoCalls returns the argv (without "sudo") of every fake sudo run.
func (f *FakeUser) SudoCalls(t testing.TB) [][]string {
	t.Helper()
	b, err := os.ReadFile(f.sudoLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for _, rec := range strings.Split(strings.TrimSuffix(string(b), "\035"), "\035") {
		calls = append(calls, strings.Split(strings.TrimSuffix(rec, "\036"), "\036"))
	}
	return calls
}

// SFTPRuns returns one line per fake sftp-server run: "sudo=1" when it ran
// under the fake sudo, "sudo=0" otherwise.
func (f *FakeUser) SFTPRuns(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(f.sftpLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// NewAgent serves an ssh-agent holding keys on a unix socket (in a short
// temporary directory: socket paths are limited to about 100 bytes) and
// returns the socket's path. It stops when the test ends.
func NewAgent(t testing.TB, keys ...Key) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sshtest-agent")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	kr := agent.NewKeyring()
	for _, k := range keys {
		if err := kr.Add(agent.AddedKey{PrivateKey: k.Private}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = agent.ServeAgent(kr, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		os.RemoveAll(dir)
	})
	return sock
}
