package provision

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hactl/hactl/internal/shell"
)

// Privilege is how a [Client] runs commands as root, detected when it
// connects.
type Privilege string

const (
	// PrivilegeRoot: the login user is root (uid 0); commands run as is.
	PrivilegeRoot Privilege = "root"
	// PrivilegeSudo: passwordless sudo ("sudo -n").
	PrivilegeSudo Privilege = "sudo"
	// PrivilegeSudoPassword: sudo with the password from
	// Config.SudoPassword, fed on the command's standard input ("sudo -S"),
	// never on its command line.
	PrivilegeSudoPassword Privilege = "sudo-password"

	// asLogin is the probe's: the login user's own rights.
	asLogin Privilege = ""
)

// PrivilegeError is returned by [Dial] when the login user is not root and
// cannot become root with sudo.
type PrivilegeError struct {
	// Host is the target's name; User the login user.
	Host, User string
	// Reason says what is wrong and how to fix it: sudo is not installed,
	// sudo asks for a password and none was provided, sudo refused the
	// password or the user (with sudo's message).
	Reason string
	// Err is the cause when there is one (the error of
	// Config.SudoPassword), or nil.
	Err error
}

func (e *PrivilegeError) Error() string {
	msg := fmt.Sprintf("host %s: user %s is not root and cannot become root: %s", e.Host, e.User, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *PrivilegeError) Unwrap() error { return e.Err }

// sftpServerPaths are where distributions install OpenSSH's sftp-server
// (Debian/Ubuntu, RHEL/Fedora/SUSE, Arch/Alpine, older RHEL); PATH is
// searched last.
var sftpServerPaths = []string{
	"/usr/lib/openssh/sftp-server",
	"/usr/libexec/openssh/sftp-server",
	"/usr/lib/ssh/sftp-server",
	"/usr/libexec/sftp-server",
}

// commandLine builds the command line sent to the server for command run with
// privilege p. It is the only place that does: it pins the locale (LC_ALL=C,
// so output and error messages parse the same everywhere), runs command with
// /bin/sh whatever the login shell is, and, for a non-root user, runs that
// through sudo:
//
//	root / probe:   env LC_ALL=C /bin/sh -c '<command>'
//	sudo:           sudo -n -- env LC_ALL=C /bin/sh -c '<command>'
//	sudo-password:  sudo -k -S -p '' -- env LC_ALL=C /bin/sh -c '<command>'
//
// With a password, sudo reads it as the first line of standard input (see
// [Client.remoteCommand]); -p ” silences the prompt and -k ignores cached
// credentials, so sudo always consumes that line instead of leaving it to the
// command.
func commandLine(p Privilege, command string) string {
	inner := "env LC_ALL=C /bin/sh -c " + shell.Quote(command)
	switch p {
	case PrivilegeSudo:
		return "sudo -n -- " + inner
	case PrivilegeSudoPassword:
		return "sudo -k -S -p '' -- " + inner
	default:
		return inner
	}
}

// remoteCommand returns the command line for command with the client's
// privilege, and what must be written to its standard input before the
// caller's: the sudo password and a newline, or nothing. Every remote command,
// the SFTP server included, goes through here.
func (c *Client) remoteCommand(command string) (line string, stdinPrefix []byte) {
	line = commandLine(c.priv, command)
	if c.priv == PrivilegeSudoPassword {
		stdinPrefix = append(append(make([]byte, 0, len(c.password)+1), c.password...), '\n')
	}
	return line, stdinPrefix
}

// scrub replaces the sudo password in command output (stderr) with a marker.
func (c *Client) scrub(b []byte) []byte {
	if len(c.password) == 0 || !bytes.Contains(b, c.password) {
		return b
	}
	return bytes.ReplaceAll(b, c.password, []byte("[sudo password]"))
}

// probeScript prints "uid=<uid>", "sftp=<path or empty>", and for a non-root
// user "sudo=missing|nopasswd|password"; for "password" it then verifies the
// password the client writes on stdin and prints "auth=ok|failed". The sudo
// command lines are the very ones commandLine builds. Then it prints the HostInfo facts
// (hostInfoScript): what callers know of every host without another command.
func probeScript() string {
	return factPrelude + `priv() {
u=$(id -u) || exit 1
echo "uid=$u"
s=
for p in ` + strings.Join(sftpServerPaths, " ") + `; do
	if [ -x "$p" ]; then s=$p; break; fi
done
if [ -z "$s" ]; then s=$(command -v sftp-server 2>/dev/null) || s=; fi
echo "sftp=$s"
if [ "$u" = 0 ]; then return 0; fi
if ! command -v sudo >/dev/null 2>&1; then echo sudo=missing; return 0; fi
if ` + commandLine(PrivilegeSudo, "true") + ` >/dev/null 2>&1 </dev/null; then echo sudo=nopasswd; return 0; fi
echo sudo=password
if ` + commandLine(PrivilegeSudoPassword, "true") + ` >/dev/null; then echo auth=ok; else echo auth=failed; fi
}
priv
` + hostInfoScript
}

// probeStep names the probe in errors.
const probeStep = "connect/privilege"

// probe runs the privilege probe (one command) and sets c.priv, c.sftpServer
// and c.password. password, when not nil, is called only if sudo asks for a
// password; the time it takes does not count against timeout.
func (c *Client) probe(ctx context.Context, timeout time.Duration, password func() ([]byte, error)) error {
	const shown = "<privilege probe: id -u; sftp-server lookup; sudo -n true>"
	start := time.Now()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(timeout, func() {
		cancel(fmt.Errorf("privilege probe timed out after %s: %w", timeout, context.DeadlineExceeded))
	})
	defer timer.Stop()

	var stderr lockedBuffer
	cmdErr := func(exit int, err error) error {
		return &CommandError{Host: c.target.Name, Step: probeStep, Command: shown, ExitCode: exit,
			Stderr: strings.TrimSpace(string(c.scrub(stderr.Bytes()))), Err: err}
	}
	privErr := func(reason string, err error) error {
		return &PrivilegeError{Host: c.target.Name, User: c.user, Reason: reason, Err: err}
	}

	sess, err := c.newSession(pctx)
	if err != nil {
		return cmdErr(-1, fmt.Errorf("open session: %w", err))
	}
	defer sess.Close()
	stdin, err := sess.StdinPipe()
	if err != nil {
		return cmdErr(-1, err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return cmdErr(-1, err)
	}
	sess.Stderr = &stderr
	c.commands.Add(1)
	if err := sess.Start(commandLine(asLogin, probeScript())); err != nil {
		return cmdErr(-1, fmt.Errorf("start: %w", c.connErr(err)))
	}
	stop := context.AfterFunc(pctx, func() {
		_ = sess.Signal(ssh.SIGKILL)
		_ = sess.Close()
	})
	defer stop()

	facts := map[string]string{}
	all := map[string][]string{}
	var early error // decided before the script ended
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		facts[k] = v
		all[k] = append(all[k], v)
		if k != "sudo" || v != "password" {
			continue
		}
		if password == nil {
			early = privErr("sudo asks for a password and none was provided: set spec.ssh.sudo.passwordEnv to the name of "+
				"an environment variable holding it, run hactl on a terminal to be asked, or allow the user passwordless sudo (NOPASSWD)", nil)
			break
		}
		paused := timer.Stop()
		pw, err := password()
		if paused {
			timer.Reset(timeout)
		}
		if err != nil {
			early = privErr("sudo asks for a password and getting it failed", err)
			break
		}
		c.password = pw
		in := append(append(make([]byte, 0, len(pw)+1), pw...), '\n')
		_, werr := stdin.Write(in)
		clear(in)
		if werr != nil {
			break // the session is gone: Wait says why
		}
		_ = stdin.Close() // a wrong password makes sudo read again: EOF, not a hang
	}
	_ = stdin.Close()
	if early != nil {
		_ = sess.Signal(ssh.SIGKILL)
		_ = sess.Close()
		return early
	}
	werr := sess.Wait()
	if pctx.Err() != nil {
		return cmdErr(-1, fmt.Errorf("after %s: %w", time.Since(start).Round(time.Millisecond), context.Cause(pctx)))
	}
	if werr != nil {
		var exit *ssh.ExitError
		if errors.As(werr, &exit) {
			return cmdErr(exit.ExitStatus(), werr)
		}
		return cmdErr(-1, c.connErr(werr))
	}

	c.sftpServer = facts["sftp"]
	c.host = hostInfo(all)
	switch {
	case facts["uid"] == "":
		return cmdErr(0, errors.New("the probe printed no uid"))
	case facts["uid"] == "0":
		c.priv = PrivilegeRoot
	case facts["sudo"] == "missing":
		return privErr("sudo is not installed (not found on the login PATH): log in as root, or install sudo and allow the user", nil)
	case facts["sudo"] == "nopasswd":
		c.priv = PrivilegeSudo
	case facts["sudo"] == "password" && facts["auth"] == "ok":
		c.priv = PrivilegeSudoPassword
	case facts["sudo"] == "password":
		msg := strings.TrimSpace(string(c.scrub(stderr.Bytes())))
		if msg == "" {
			msg = "no message"
		}
		return privErr("sudo refused the password or the user (sudo said: "+oneLine(msg)+")", nil)
	default:
		return cmdErr(0, fmt.Errorf("unexpected probe output %q", facts))
	}
	return nil
}

// oneLine joins lines with "; " for a one-line message.
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
