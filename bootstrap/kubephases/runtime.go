package kubephases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
)

// packageTimeout bounds a package installation (index refresh + download + install).
const packageTimeout = 10 * time.Minute

// Runtime installs the container runtime on every node: the missing packages (containerd, runc,
// the CNI plugins, conntrack, socat, ethtool, iptables, kmod) with the host's package manager
// (started in the background by kube/binaries; waited for here),
// containerd's configuration, the kernel modules and settings (loaded and applied now and at every
// boot); containerd is enabled and (re)started when its configuration changed, and must answer on
// its socket before the phase ends.
type Runtime struct{ g *Group }

// Title is PhaseRuntime.
func (*Runtime) Title() string { return PhaseRuntime }

// Mutates: the phase changes hosts.
func (*Runtime) Mutates() bool { return true }

// ShouldRun: some node lacks a package, a file, or a running containerd.
func (ph *Runtime) ShouldRun() bool {
	if !ph.g.planned() {
		return false
	}
	for _, n := range ph.g.nodes {
		p := ph.g.plan(n.host.Name)
		if len(p.packages) > 0 || len(runtimeFiles(p)) > 0 || p.restartContainerd || p.startContainerd {
			return true
		}
	}
	return false
}

// runtimeFiles are the plan's files this phase writes (all but kubelet's units).
func runtimeFiles(p *nodePlan) []provision.File {
	var out []provision.File
	for _, f := range p.files {
		if f.Note != "unit" {
			out = append(out, provision.File{Path: f.Path, Mode: f.Mode, Content: f.Data, SHA256: f.Sum})
		}
	}
	return out
}

// Run does the phase's work, on every node at once. Errors per host.
func (ph *Runtime) Run(ctx context.Context) error {
	g := ph.g
	return g.forEach(ctx, g.nodes, func(ctx context.Context, n node) error {
		p := g.plan(n.host.Name)
		files := runtimeFiles(p)
		if len(p.packages) == 0 && len(files) == 0 && !p.restartContainerd && !p.startContainerd {
			return nil
		}
		if err := g.waitPackages(ctx, n); err != nil {
			return err
		}
		sctx, cancel := g.run.StepCtx(ctx)
		defer cancel()
		if len(files) > 0 {
			var keep []string
			for _, fl := range files {
				keep = append(keep, fmt.Sprintf("if [ -e %[1]s ] && [ ! -e %[1]s%[2]s ]; then cp -p %[1]s %[1]s%[2]s; fi", shell.Quote(fl.Path), kubenode.PrevSuffix))
			}
			if _, err := g.run.Exec(sctx, n.host.Name, PhaseRuntime, strings.Join(keep, "\n")); err != nil {
				return err
			}
			if err := g.run.Upload(sctx, n.host.Name, PhaseRuntime, files); err != nil {
				return err
			}
		}
		if _, err := g.run.Exec(sctx, n.host.Name, PhaseRuntime, runtimeScript(p)); err != nil {
			var ce *provision.CommandError
			if asCommandError(err, &ce) && ce.ExitCode == exitKernel {
				return &PreflightError{Host: n.host.Name, Check: CheckNetfilter, Msg: lastLine(ce.Stderr)}
			}
			return g.run.ExplainUnit(ctx, n.host.Name, PhaseRuntime, err, "containerd.service")
		}
		what := "containerd running"
		if p.restartContainerd {
			what = "containerd configured and restarted"
		}
		g.run.Printer.Hostf(n.host.Name, "%s; kernel modules and settings applied", what)
		return nil
	})
}

// exitKernel: the kernel settings could not be applied (br_netfilter, forwarding).
const exitKernel = 94

// runtimeScript loads the modules and applies the settings (tolerating what the host forbids, then
// checking the two that matter), and (re)starts containerd, waiting for its socket.
func runtimeScript(p *nodePlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, `set -eu
for m in overlay br_netfilter; do modprobe "$m" 2>/dev/null || true; done
sysctl -q -e -p %s >/dev/null 2>&1 || true
[ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ] || { echo "net.ipv4.ip_forward is not 1 after applying %s" >&2; exit %d; }
if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
  [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)" = 1 ] || { echo "net.bridge.bridge-nf-call-iptables is not 1 after applying %s" >&2; exit %d; }
else
  echo "br_netfilter is not loaded (no /proc/sys/net/bridge) and modprobe br_netfilter failed" >&2; exit %d
fi
`, kubenode.SysctlPath, kubenode.SysctlPath, exitKernel, kubenode.SysctlPath, exitKernel, exitKernel)
	b.WriteString("systemctl enable containerd >/dev/null 2>&1\n")
	if p.restartContainerd {
		b.WriteString("systemctl restart containerd\n")
	} else {
		b.WriteString("systemctl start containerd\n")
	}
	b.WriteString(`i=0
until ctr version >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 300 ] || { echo 'containerd does not answer on its socket after 30 s' >&2; exit 1; }; sleep 0.1; done
`)
	return b.String()
}

func asCommandError(err error, target **provision.CommandError) bool { return errors.As(err, target) }

// startPackages starts, in the background, the installation of every node's missing runtime
// packages: they depend on nothing hactl installs, so they go in while the binaries are uploaded and
// etcd and the load balancer come up; kube/runtime waits for them (waitPackages).
func (g *Group) startPackages(ctx context.Context) {
	for _, n := range g.nodes {
		p := g.plan(n.host.Name)
		if len(p.packages) == 0 {
			continue
		}
		imp := &pendingImport{done: make(chan struct{})}
		g.mu.Lock()
		if g.packages[n.host.Name] != nil {
			g.mu.Unlock()
			continue
		}
		g.packages[n.host.Name] = imp
		g.mu.Unlock()
		go func(n node) {
			defer close(imp.done)
			imp.err = installPackages(ctx, g.run, n, g.facts[n.host.Name].PkgManager, p.packages)
		}(n)
	}
}

// installPackages installs packages, node n's missing runtime packages, with its package manager
// pm (provision.InstallCommand's names).
func installPackages(ctx context.Context, run *runctx.Run, n node, pm string, packages []string) error {
	cmd, err := provision.InstallCommand(pm, packages)
	if err != nil {
		return fmt.Errorf("host %s: step %s: %w", n.host.Name, PhaseRuntime, err)
	}
	pctx, cancel := context.WithTimeout(ctx, packageTimeout)
	defer cancel()
	start := time.Now()
	if _, err := run.Exec(pctx, n.host.Name, PhaseRuntime, cmd); err != nil {
		return err
	}
	run.Printer.Hostf(n.host.Name, "[%s, in the background] installed %s (%s)", PhaseRuntime, strings.Join(packages, " "), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// waitPackages waits for node n's package installation (starting it when kube/binaries did not).
func (g *Group) waitPackages(ctx context.Context, n node) error {
	g.startPackages(ctx)
	g.mu.Lock()
	imp := g.packages[n.host.Name]
	g.mu.Unlock()
	if imp == nil {
		return nil
	}
	select {
	case <-imp.done:
		return imp.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
