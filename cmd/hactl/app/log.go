package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hactl/hactl/ui"
)

// defaultLogFile is where the debug log goes unless --log-file says otherwise: the user's cache dir,
// outside the state dir (a dry run changes nothing there), like k0sctl's ~/.cache/k0sctl/k0sctl.log.
func defaultLogFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "hactl", "hactl.log")
}

// openLog attaches the debug log to p (mode 0600, appended) and writes a header naming the command.
// A log that cannot be opened is a warning, not an error. The returned func closes it.
func openLog(g *globalOptions, p *ui.Printer, args []string) (path string, closeFn func()) {
	if g.logFile == "" {
		return "", func() {}
	}
	if err := os.MkdirAll(filepath.Dir(g.logFile), 0o700); err != nil {
		p.Warnf("debug log %s: %v", g.logFile, err)
		return "", func() {}
	}
	f, err := os.OpenFile(g.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.Warnf("debug log %s: %v", g.logFile, err)
		return "", func() {}
	}
	fmt.Fprintf(f, "\n%s ==== hactl %s: hactl %s\n", time.Now().UTC().Format(time.RFC3339), Version(), strings.Join(args, " "))
	p.SetLog(f)
	return g.logFile, func() {
		p.SetLog(io.Discard)
		f.Close()
	}
}
