package kubephases

import (
	"context"
	"strings"

	"github.com/hactl/hactl/provision"
)

// Kubelet installs kubelet's systemd unit and kubeadm's drop-in and enables kubelet. On a node that
// has not joined, kubelet is not started (kubeadm init/join starts it with its configuration); on a
// joined node it is started when stopped, and restarted when its binary or units changed.
type Kubelet struct{ g *Group }

// Title is PhaseKubelet.
func (*Kubelet) Title() string { return PhaseKubelet }

// Mutates: the phase changes hosts.
func (*Kubelet) Mutates() bool { return true }

// ShouldRun: some node's units, enablement or kubelet state differ.
func (ph *Kubelet) ShouldRun() bool {
	if !ph.g.planned() {
		return false
	}
	for _, n := range ph.g.nodes {
		p := ph.g.plan(n.host.Name)
		if len(unitFiles(p)) > 0 || p.enableKubelet || p.kubelet != "" {
			return true
		}
	}
	return false
}

func unitFiles(p *nodePlan) []provision.File {
	var out []provision.File
	for _, f := range p.files {
		if f.Note == "unit" {
			out = append(out, provision.File{Path: f.Path, Mode: f.Mode, Content: f.Data, SHA256: f.Sum})
		}
	}
	return out
}

// Run does the phase's work, on every node at once. Errors per host.
func (ph *Kubelet) Run(ctx context.Context) error {
	g := ph.g
	return g.forEach(ctx, g.nodes, func(ctx context.Context, n node) error {
		p := g.plan(n.host.Name)
		files := unitFiles(p)
		if len(files) == 0 && !p.enableKubelet && p.kubelet == "" {
			return nil
		}
		sctx, cancel := g.run.StepCtx(ctx)
		defer cancel()
		if len(files) > 0 {
			if err := g.run.Upload(sctx, n.host.Name, PhaseKubelet, files); err != nil {
				return err
			}
		}
		var cmds, did []string
		if len(files) > 0 {
			cmds = append(cmds, "systemctl daemon-reload")
			did = append(did, "units written")
		}
		if p.enableKubelet || len(files) > 0 {
			cmds = append(cmds, "systemctl enable kubelet >/dev/null 2>&1")
			did = append(did, "enabled")
		}
		if p.kubelet != "" {
			cmds = append(cmds, "systemctl "+p.kubelet+" kubelet")
			did = append(did, p.kubelet+"ed")
		}
		if _, err := g.run.Exec(sctx, n.host.Name, PhaseKubelet, "set -e\n"+strings.Join(cmds, "\n")); err != nil {
			return g.run.ExplainUnit(ctx, n.host.Name, PhaseKubelet, err, "kubelet.service")
		}
		if p.kubelet != "" {
			g.mu.Lock()
			g.changed = true
			g.mu.Unlock()
		}
		g.run.Printer.Hostf(n.host.Name, "kubelet: %s", strings.Join(did, ", "))
		return nil
	})
}
