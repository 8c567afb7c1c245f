package kubephases

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
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

// ClusterState is what the API says of the spec's nodes.
type ClusterState struct {
	// Nodes maps node name to its state.
	Nodes map[string]NodeState
	// Pods maps "<component>-<node>" static pod names to whether they are Running and Ready.
	Pods map[string]bool
	// Proxy maps node name to whether its kube-proxy pod is Running and Ready.
	Proxy map[string]bool
	// DNSReady and DNSPods count CoreDNS pods (label k8s-app=kube-dns) Ready and in all.
	DNSReady, DNSPods int
}

// NodeState is one Node's condition Ready, kubelet version and labels.
type NodeState struct {
	Ready          bool
	KubeletVersion string
	Zone           string
	PodCIDR        string
}

// stateCommand prints the Nodes and the kube-system pods as two JSON documents separated by a line
// "---", through the endpoint (--server: the VIP, not the local apiserver).
func stateCommand(endpoint string) string {
	k := "kubectl --kubeconfig " + adminConf + " --server https://" + endpoint + " --request-timeout 10s"
	return k + " get nodes -o json && echo --- && " + k + " get pods -n kube-system -o json"
}

// ParseClusterState reads stateCommand's output.
func ParseClusterState(out []byte) (ClusterState, error) {
	nodesJSON, podsJSON, ok := bytes.Cut(out, []byte("\n---\n"))
	if !ok {
		return ClusterState{}, fmt.Errorf("unexpected kubectl output (%d bytes)", len(out))
	}
	var nl struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				PodCIDR string `json:"podCIDR"`
			} `json:"spec"`
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
				NodeInfo   struct {
					KubeletVersion string `json:"kubeletVersion"`
				} `json:"nodeInfo"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(nodesJSON, &nl); err != nil {
		return ClusterState{}, fmt.Errorf("nodes: %w", err)
	}
	st := ClusterState{Nodes: map[string]NodeState{}, Pods: map[string]bool{}, Proxy: map[string]bool{}}
	for _, n := range nl.Items {
		ns := NodeState{KubeletVersion: n.Status.NodeInfo.KubeletVersion, Zone: n.Metadata.Labels["topology.kubernetes.io/zone"], PodCIDR: n.Spec.PodCIDR}
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" {
				ns.Ready = c.Status == "True"
			}
		}
		st.Nodes[n.Metadata.Name] = ns
	}
	var pl struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
			Status struct {
				Phase      string                          `json:"phase"`
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(podsJSON, &pl); err != nil {
		return ClusterState{}, fmt.Errorf("pods: %w", err)
	}
	for _, p := range pl.Items {
		ready := p.Status.Phase == "Running"
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status != "True" {
				ready = false
			}
		}
		switch p.Metadata.Labels["k8s-app"] {
		case "kube-proxy":
			st.Proxy[p.Spec.NodeName] = st.Proxy[p.Spec.NodeName] || ready
		case "kube-dns":
			st.DNSPods++
			if ready {
				st.DNSReady++
			}
		default:
			if p.Metadata.Labels["tier"] == "control-plane" {
				st.Pods[p.Metadata.Name] = ready
			}
		}
	}
	return st, nil
}

// Problems lists what is not as it must be for cluster c: nodes missing or not Ready (registered
// only, with cni none), static pods missing or not Ready. Empty: all good.
func (st ClusterState) Problems(c *v1alpha1.Cluster) []string {
	var out []string
	needReady := c.Spec.Kubernetes.CNI != v1alpha1.CNINone
	for _, h := range c.KubeNodes() {
		ns, ok := st.Nodes[h.Name]
		switch {
		case !ok:
			out = append(out, h.Name+" not registered")
		case needReady && !ns.Ready:
			out = append(out, h.Name+" NotReady")
		}
		if ready, ok := st.Proxy[h.Name]; ok && needReady && !ready {
			out = append(out, "kube-proxy on "+h.Name+" not Ready")
		} else if !ok && needReady {
			out = append(out, "no kube-proxy pod on "+h.Name)
		}
		if h.HasRole(v1alpha1.RoleControlPlane) {
			for _, comp := range kubenode.StaticPods {
				name := comp + "-" + h.Name
				if ready, ok := st.Pods[name]; !ok {
					out = append(out, name+" missing")
				} else if !ready {
					out = append(out, name+" not Ready")
				}
			}
		}
	}
	if needReady && c.Spec.Kubernetes.CoreDNSEnabled() && (st.DNSPods == 0 || st.DNSReady < st.DNSPods) {
		out = append(out, fmt.Sprintf("CoreDNS %d/%d Ready", st.DNSReady, st.DNSPods))
	}
	sort.Strings(out)
	return out
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
		res, err := g.run.Exec(sctx, src.host.Name, PhaseWait, stateCommand(g.endpoint))
		cancel()
		var problems []string
		if err == nil {
			st, perr := ParseClusterState(res.Stdout)
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
