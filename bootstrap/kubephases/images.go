package kubephases

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hactl/hactl/provision"
)

// importTimeout bounds the upload and import of one node's archives (hundreds of MiB).
const importTimeout = 10 * time.Minute

// Images imports, on every node missing an image it needs, the spec's archives holding those
// images (streamed over SSH into `ctr -n k8s.io images import -`), and checks that containerd then has
// every image. Workers need kube-proxy, pause and CoreDNS; control planes every image.
type Images struct{ g *Group }

// Title is PhaseImages.
func (*Images) Title() string { return PhaseImages }

// Mutates: the phase changes hosts.
func (*Images) Mutates() bool { return true }

// ShouldRun: some node lacks an image the archives hold.
func (ph *Images) ShouldRun() bool {
	if !ph.g.planned() {
		return false
	}
	for _, n := range ph.g.nodes {
		if len(ph.g.plan(n.host.Name).archives) > 0 {
			return true
		}
	}
	return false
}

// Run does the phase's work, on every node at once. Errors per host: upload or import failures, or
// an image still missing after the import.
func (ph *Images) Run(ctx context.Context) error {
	g := ph.g
	return g.forEach(ctx, g.nodes, func(ctx context.Context, n node) error {
		p := g.plan(n.host.Name)
		if len(p.archives) == 0 {
			return nil
		}
		ictx, cancel := context.WithTimeout(ctx, importTimeout)
		defer cancel()
		start := time.Now()
		for _, a := range p.archives {
			f, err := os.Open(a)
			if err != nil {
				return err
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return err
			}
			// Streamed into ctr on standard input: no copy of the archive lands on the host's disk,
			// and the import runs while the bytes arrive.
			_, err = g.run.Exec(ictx, n.host.Name, PhaseImages, "ctr -n k8s.io images import - >/dev/null", provision.WithStdin(io.LimitReader(f, fi.Size())))
			f.Close()
			if err != nil {
				return fmt.Errorf("import %s: %w", filepath.Base(a), err)
			}
		}
		res, err := g.run.Exec(ictx, n.host.Name, PhaseImages, "ctr -n k8s.io images ls -q")
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, l := range strings.Fields(string(res.Stdout)) {
			have[l] = true
		}
		var still []string
		for _, img := range p.missingImages {
			if !have[img] {
				still = append(still, img)
			}
		}
		if len(still) > 0 {
			return stepf(n, PhaseImages, "containerd lacks %s after importing %s", strings.Join(still, ", "), strings.Join(p.archives, ", "))
		}
		g.run.Printer.Hostf(n.host.Name, "imported %d image(s) from %d archive(s) in %s", len(p.missingImages), len(p.archives), time.Since(start).Round(100*time.Millisecond))
		return nil
	})
}
