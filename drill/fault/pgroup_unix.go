//go:build unix

package fault

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup runs cmd in a process group of its own, and makes the context's cancellation
// kill that whole group (the shell and what it started, e.g. a docker client), not only the
// shell.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
