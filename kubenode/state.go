package kubenode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
)

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

// AdminConf is kubeadm's admin kubeconfig on control-plane hosts (its server: the endpoint).
const AdminConf = "/etc/kubernetes/admin.conf"

// StateCommand is run on a control-plane host: it prints the Nodes and the kube-system pods as two
// JSON documents separated by a line "---", asking through endpoint (host:port; --server: the VIP,
// not the local apiserver), each request bounded by timeout.
func StateCommand(endpoint string, timeout time.Duration) string {
	k := "kubectl --kubeconfig " + AdminConf + " --server https://" + endpoint + " --request-timeout " + timeout.String()
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
			for _, comp := range StaticPods {
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
