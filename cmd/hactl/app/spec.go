package app

import (
	"os"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/ui"
)

// loadSpec loads, defaults and validates the spec, prints its warnings, and (withFiles) checks the
// local files it names (binaries, SSH key). Every error here is found before any host is contacted
// and exits 2.
func loadSpec(path string, p *ui.Printer, withFiles bool) (*v1alpha1.Cluster, error) {
	c, warnings, err := specload.Load(path)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		p.Warnf("%s: %s", w.Field, w.Message)
	}
	if !withFiles {
		return c, nil
	}
	if err := c.ValidationError(path, specload.ValidateLocalFiles(c)); err != nil {
		return nil, err
	}
	if err := c.ValidationError(path, etcd.CheckBinaries(c)); err != nil {
		return nil, err
	}
	return c, nil
}

// checkSSHEnvironment refuses, before any host is contacted (exit 2), environment variables the
// spec names for secrets that are unset and an agent-only login without SSH_AUTH_SOCK.
func checkSSHEnvironment(c *v1alpha1.Cluster, path string) error {
	return c.ValidationError(path, specload.ValidateEnvironment(c, os.Getenv))
}

func splitList(s []string) []string {
	var out []string
	for _, x := range s {
		for _, y := range strings.Split(x, ",") {
			if y = strings.TrimSpace(y); y != "" {
				out = append(out, y)
			}
		}
	}
	return out
}

// loadForHosts loads the spec for a command that contacts the hosts: local files checked
// (binaries, keys) and the SSH environment (variables the spec names) set. Errors exit 2.
func loadForHosts(g *globalOptions, p *ui.Printer) (*v1alpha1.Cluster, error) {
	c, err := loadSpec(g.file, p, true)
	if err != nil {
		return nil, err
	}
	if err := checkSSHEnvironment(c, g.file); err != nil {
		return nil, err
	}
	return c, nil
}

// hostRun is the start of a command that acts on the spec's hosts: the progress printer on
// stderr, the debug log opened, the spec loaded with its local files and SSH environment checked.
// The caller defers closeLog and prints logPath after a failure.
func hostRun(s Streams, g *globalOptions) (p *ui.Printer, c *v1alpha1.Cluster, logPath string, closeLog func(), err error) {
	p = ui.New(s.Err, g.verbose, false)
	logPath, closeLog = openLog(g, p, os.Args[1:])
	if c, err = loadForHosts(g, p); err != nil {
		closeLog()
		return nil, nil, "", func() {}, err
	}
	return p, c, logPath, closeLog, nil
}
