//go:build unix

package drill

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockPath is the lock a drill (or drill cleanup) holds on the state dir for its whole run.
func lockPath(stateDir string) string { return filepath.Join(stateDir, "drill", "lock") }

// lock takes the state dir's drill lock without waiting (flock: released when hactl exits, even on
// SIGKILL) and writes this process's pid into it. A lock held by another process is a
// *RefusedError naming its pid: two drills at once would measure each other's faults and undo them.
func lock(stateDir string) (release func(), err error) {
	p := lockPath(stateDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("drill lock: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("drill lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		raw, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
			return nil, &RefusedError{Reasons: []string{fmt.Sprintf("another drill or drill cleanup (pid %d) is running on %s", pid, stateDir)},
				Fix: "wait for it to finish (two drills at once would measure and undo each other's faults)"}
		}
		return nil, fmt.Errorf("drill lock %s: %w", p, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
