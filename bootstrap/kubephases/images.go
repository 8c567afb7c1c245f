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
//
// Workers' imports run in the background: a worker needs its images only once it has joined
// (kube-proxy's pod), so they overlap kubeadm init and the control planes' joins, which mostly
// wait; kube/join waits for a worker's import before it joins it (and reports its failure).
func (ph *Images) Run(ctx context.Context) error {
	g := ph.g
	var cps []node
	for _, n := range g.nodes {
		if len(g.plan(n.host.Name).archives) == 0 {
			continue
		}
		if n.cp {
			cps = append(cps, n)
			continue
		}
		imp := &pendingImport{done: make(chan struct{})}
		g.mu.Lock()
		g.imports[n.host.Name] = imp
		g.mu.Unlock()
		go func(n node) {
			defer close(imp.done)
			imp.err = ph.importImages(ctx, n)
		}(n)
	}
	return g.forEach(ctx, cps, ph.importImages)
}

// pendingImport is a worker's import running in the background.
type pendingImport struct {
	done chan struct{}
	err  error
}

// waitImport waits for node n's background import, if any, and returns its error.
func (g *Group) waitImport(ctx context.Context, n node) error {
	g.mu.Lock()
	imp := g.imports[n.host.Name]
	g.mu.Unlock()
	if imp == nil {
		return nil
	}
	select {
	case <-imp.done:
		if imp.err != nil {
			return fmt.Errorf("%s: %w", PhaseImages, imp.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// importImages streams the archives node n lacks images of into its containerd and checks the
// images are there.
func (ph *Images) importImages(ctx context.Context, n node) error {
	g := ph.g
	p := g.plan(n.host.Name)
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
	what := ""
	if !n.cp {
		what = "[" + PhaseImages + ", in the background] "
	}
	g.run.Printer.Hostf(n.host.Name, "%simported %d image(s) from %d archive(s) in %s", what, len(p.missingImages), len(p.archives), time.Since(start).Round(100*time.Millisecond))
	return nil
}
