package kubephases

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/kubenode"
)

// Wait waits, after a run that changed a node, until every node of the spec is Ready (registered,
// with cni none: the user's CNI makes them Ready), every control-plane host's static pods
// (kube-apiserver, kube-controller-manager, kube-scheduler) are Running and Ready, and (with a CNI)
// every node's kube-proxy and the CoreDNS pods (when deployed) are Ready, asking the API
// through the endpoint (the VIP) from a control plane, every 2 s up to WaitTimeout.
type Wait struct{ g *Group }

// Title is PhaseWait.
func (*Wait) Title() string { return PhaseWait }

// ShouldRun: a node changed in this run.
func (ph *Wait) ShouldRun() bool {
	ph.g.mu.Lock()
	defer ph.g.mu.Unlock()
	return ph.g.planned() && ph.g.changed && ph.g.source != ""
}

// Run does the phase's work. Errors: the wait timed out (naming what is still not Ready).
func (ph *Wait) Run(ctx context.Context) error {
	g := ph.g
	src := g.nodeNamed(g.source)
	start := time.Now()
	deadline := start.Add(g.opt.WaitTimeout)
	var last []string
	for {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := g.run.Exec(sctx, src.host.Name, PhaseWait, kubenode.StateCommand(g.endpoint, 10*time.Second))
		cancel()
		var problems []string
		if err == nil {
			st, perr := kubenode.ParseClusterState(res.Stdout)
			if perr != nil {
				problems = []string{perr.Error()}
			} else if problems = st.Problems(g.run.Spec); len(problems) == 0 {
				g.run.Printer.Infof("  %d node(s) Ready through %s, every control-plane static pod, kube-proxy and CoreDNS pod Ready (%s)", len(g.nodes), g.endpoint,
					time.Since(start).Round(100*time.Millisecond))
				return nil
			}
		} else {
			problems = []string{"API through " + g.endpoint + ": " + lastLine(err.Error())}
		}
		if !slices.Equal(problems, last) {
			g.run.Printer.Debugf("kube/wait: %s", strings.Join(problems, "; "))
			last = problems
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("host %s: step %s: the cluster is not Ready within %s: %s", src.host.Name, PhaseWait, g.opt.WaitTimeout, strings.Join(problems, "; "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}
