package kubephases

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
)

// CNI gives every node, with spec.kubernetes.cni bridge, its CNI network (kubenode.BridgeConfig on
// the pod range kube-controller-manager gave its Node, spec.podCIDR) and the routes to every other
// node's range (kubenode.RoutesUnitText, applied now and at every boot). The ranges are read from
// the nodes' own networks when every node has one, else from the Nodes through the API (one
// command on a control plane, repeated until every Node has a range).
type CNI struct{ g *Group }

// Title is PhaseCNI.
func (*CNI) Title() string { return PhaseCNI }

// Mutates: the phase changes hosts.
func (*CNI) Mutates() bool { return true }

// ShouldRun: cni bridge, and kube/join ran or some node lacks its network or routes. The decision
// needs the ranges, so it is taken in Run; ShouldRun only excludes cni none.
func (ph *CNI) ShouldRun() bool {
	return ph.g.planned() && ph.g.run.Spec.Spec.Kubernetes.CNI == v1alpha1.CNIBridge && ph.g.source != "" && !ph.inSync()
}

// inSync reports whether every node's network and routes are as they must be according to the
// facts alone (no node joined in this run, every node's range readable from its network): then
// kube/cni has nothing to do and asks no one.
func (ph *CNI) inSync() bool {
	g := ph.g
	ranges := map[string]netip.Prefix{}
	for _, n := range g.nodes {
		f := g.facts[n.host.Name]
		g.mu.Lock()
		joinedNow := g.joined[n.host.Name] && !f.joined()
		g.mu.Unlock()
		r, ok := kubenode.BridgeRange(f.CNIConf)
		if joinedNow || !ok {
			return false
		}
		ranges[n.host.Name] = r
	}
	for _, n := range g.nodes {
		f := g.facts[n.host.Name]
		if !bytes.Equal(f.CNIConf, kubenode.BridgeConfig(ranges[n.host.Name])) ||
			f.Sums[kubenode.RoutesUnitPath] != runctx.Sum(kubenode.RoutesUnitText(routesFor(g.nodes, ranges, n.host.Name))) ||
			f.RoutesUnit.Active != "active" || f.RoutesUnit.Enabled != "enabled" {
			return false
		}
	}
	return true
}

// routesFor returns the routes node self needs: every other node's range via its address.
func routesFor(nodes []node, ranges map[string]netip.Prefix, self string) []kubenode.Route {
	var out []kubenode.Route
	for _, n := range nodes {
		if n.host.Name != self {
			out = append(out, kubenode.Route{PodCIDR: ranges[n.host.Name], Via: n.peer})
		}
	}
	return out
}

// Run does the phase's work. Errors: a Node without a pod range after the wait; per host, writing.
func (ph *CNI) Run(ctx context.Context) error {
	g := ph.g
	g.network.Wait() // the networks of the nodes joined in this run, written right after their joins
	ranges := map[string]netip.Prefix{}
	for _, n := range g.nodes {
		f := g.facts[n.host.Name]
		g.mu.Lock()
		r, learned := g.podCIDRs[n.host.Name]
		joinedNow := g.joined[n.host.Name] && !f.joined()
		g.mu.Unlock()
		switch {
		case learned:
			ranges[n.host.Name] = r
		case joinedNow:
			// joined in this run, its range not learned: only the API knows it
		default:
			if r, ok := kubenode.BridgeRange(f.CNIConf); ok {
				ranges[n.host.Name] = r
			}
		}
	}
	if len(ranges) < len(g.nodes) {
		var err error
		if ranges, err = ph.podCIDRsFromAPI(ctx); err != nil {
			return err
		}
	}
	return g.forEach(ctx, g.nodes, func(ctx context.Context, n node) error {
		f := g.facts[n.host.Name]
		conf := kubenode.BridgeConfig(ranges[n.host.Name])
		unit := kubenode.RoutesUnitText(routesFor(g.nodes, ranges, n.host.Name))
		var files []provision.File
		g.mu.Lock()
		have, wrote := g.written[n.host.Name]
		g.mu.Unlock()
		if !wrote {
			have = f.CNIConf
		}
		if !bytes.Equal(have, conf) {
			files = append(files, provision.File{Path: kubenode.CNIConfPath, Mode: 0o644, Content: conf})
		}
		unitChanged := f.Sums[kubenode.RoutesUnitPath] != runctx.Sum(unit)
		if unitChanged {
			files = append(files, provision.File{Path: kubenode.RoutesUnitPath, Mode: 0o644, Content: unit})
		}
		running := f.RoutesUnit.Active == "active" && f.RoutesUnit.Enabled == "enabled"
		if len(files) == 0 && running {
			return nil
		}
		sctx, cancel := g.run.StepCtx(ctx)
		defer cancel()
		if len(files) > 0 {
			if err := g.run.Upload(sctx, n.host.Name, PhaseCNI, files); err != nil {
				return err
			}
		}
		cmd := "set -e\nsystemctl daemon-reload\nsystemctl enable " + kubenode.RoutesUnit + " >/dev/null 2>&1\nsystemctl restart " + kubenode.RoutesUnit
		if _, err := g.run.Exec(sctx, n.host.Name, PhaseCNI, cmd); err != nil {
			return g.run.ExplainUnit(ctx, n.host.Name, PhaseCNI, err, kubenode.RoutesUnit)
		}
		g.mu.Lock()
		g.plans[n.host.Name].cni, g.changed = true, true
		g.mu.Unlock()
		g.run.Printer.Hostf(n.host.Name, "pod network %s on cni0, routes to %d other node(s)", ranges[n.host.Name], len(g.nodes)-1)
		return nil
	})
}

// podCIDRsFromAPI asks the API (kubectl on the source control plane) for every Node's spec.podCIDR,
// until each spec node has one or WaitTimeout passes.
func (ph *CNI) podCIDRsFromAPI(ctx context.Context) (map[string]netip.Prefix, error) {
	g := ph.g
	src := g.nodeNamed(g.source)
	deadline := time.Now().Add(g.opt.WaitTimeout)
	cmd := "kubectl --kubeconfig " + adminConf + " get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR}{\"\\n\"}{end}' --request-timeout 10s"
	var last string
	for {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := g.run.Exec(sctx, src.host.Name, PhaseCNI, cmd)
		cancel()
		ranges := map[string]netip.Prefix{}
		if err == nil {
			for _, line := range strings.Split(string(res.Stdout), "\n") {
				f := strings.Fields(line)
				if len(f) == 2 {
					if p, perr := netip.ParsePrefix(f[1]); perr == nil {
						ranges[f[0]] = p
					}
				}
			}
			var missing []string
			for _, n := range g.nodes {
				if _, ok := ranges[n.host.Name]; !ok {
					missing = append(missing, n.host.Name)
				}
			}
			if len(missing) == 0 {
				return ranges, nil
			}
			last = "no pod range yet for " + strings.Join(missing, ", ")
		} else {
			last = err.Error()
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("host %s: step %s: the Nodes' pod ranges (spec.podCIDR) within %s: %s", src.host.Name, PhaseCNI, g.opt.WaitTimeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// networkSoon writes node n's bridge network in the background as soon as kube-controller-manager
// has given its Node a pod range (asked through the source control plane): the node turns Ready,
// and pods scheduled on it start, while the next nodes join. kube/cni waits for it, adds the
// routes, and writes whatever this did not.
func (g *Group) networkSoon(ctx context.Context, n node) {
	if g.run.Spec.Spec.Kubernetes.CNI != v1alpha1.CNIBridge {
		return
	}
	g.network.Add(1)
	go func() {
		defer g.network.Done()
		src := g.nodeNamed(g.source)
		cmd := "kubectl --kubeconfig " + adminConf + " get node " + shell.Quote(n.host.Name) + " -o jsonpath='{.spec.podCIDR}' --request-timeout 5s"
		deadline := time.Now().Add(time.Minute)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			res, err := g.run.Exec(sctx, src.host.Name, PhaseCNI, cmd)
			cancel()
			if p, perr := netip.ParsePrefix(strings.TrimSpace(string(res.Stdout))); err == nil && perr == nil {
				conf := kubenode.BridgeConfig(p)
				uctx, cancel := g.run.StepCtx(ctx)
				err := g.run.Upload(uctx, n.host.Name, PhaseCNI, []provision.File{{Path: kubenode.CNIConfPath, Mode: 0o644, Content: conf}})
				cancel()
				if err != nil {
					g.run.Printer.Debugf("%s: pod network after the join: %v (kube/cni writes it)", n.host.Name, err)
					return
				}
				g.mu.Lock()
				g.podCIDRs[n.host.Name], g.written[n.host.Name] = p, conf
				g.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}
