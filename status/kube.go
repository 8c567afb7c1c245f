package status

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// KubeStatus is the Kubernetes section of `hactl status` (spec.kubernetes): what the API says
// through the endpoint, asked from a control-plane host over SSH, and each apiserver's /readyz.
type KubeStatus struct {
	// Endpoint is the API endpoint asked (the VIP:port); Via the control-plane host that asked.
	Endpoint string `json:"endpoint"`
	Via      string `json:"via,omitempty"`
	// Nodes are the spec's Kubernetes nodes, in spec order.
	Nodes []KubeNode `json:"nodes"`
	// StaticPods maps control-plane host → component → Ready.
	StaticPods map[string]map[string]bool `json:"staticPods"`
	// Readyz maps each apiserver (control-plane host name) and "vip" to its /readyz answer ("ok",
	// or the error), as a control-plane host sees them; "vip" is the endpoint (the VIP, or
	// spec.loadBalancer.external).
	Readyz map[string]string `json:"readyz"`
	// Problems are what is not Ready (also in Report.Problems, prefixed "kubernetes: ").
	Problems []string `json:"problems,omitempty"`
	// Unreachable lists why each control-plane host could not be asked, when none could.
	Unreachable []string `json:"unreachable,omitempty"`
}

// KubeNode is one node as the API reports it.
type KubeNode struct {
	Name       string `json:"name"`
	Role       string `json:"role"`
	Registered bool   `json:"registered"`
	Ready      bool   `json:"ready"`
	Version    string `json:"version,omitempty"`
	Zone       string `json:"zone,omitempty"`
	PodCIDR    string `json:"podCIDR,omitempty"`
}

// readyzScript asks each apiserver and the endpoint for /readyz with kubectl (installed on control
// planes by hactl), one line each: "readyz NAME ok" or "readyz NAME ERR message".
func readyzScript(c *v1alpha1.Cluster, endpoint string, timeout time.Duration) string {
	port := strconv.Itoa(c.APIServerPort())
	var b strings.Builder
	ask := func(name, hostPort string) {
		fmt.Fprintf(&b, "if out=$(kubectl --kubeconfig %s --server %s --request-timeout %s get --raw /readyz 2>&1); then echo \"readyz %s $out\"; else echo \"readyz %s ERR $(echo $out | tail -c 200)\"; fi\n",
			kubenode.AdminConf, shell.Quote("https://"+hostPort), timeout, name, name)
	}
	for _, h := range c.ControlPlaneHosts() {
		ask(h.Name, net.JoinHostPort(h.Address, port))
	}
	ask("vip", endpoint)
	return b.String()
}

// collectKube asks the control-plane hosts in spec order until one answers.
func collectKube(ctx context.Context, c *v1alpha1.Cluster, d *provision.Dialer, timeout time.Duration, p *ui.Printer) *KubeStatus {
	ks := &KubeStatus{StaticPods: map[string]map[string]bool{}, Readyz: map[string]string{}}
	ep, err := kubeadm.Endpoint(c)
	if err != nil {
		ks.Problems = []string{err.Error()}
		return ks
	}
	ks.Endpoint = ep
	cmd := kubenode.StateCommand(ep, timeout) + " ; echo ---\n" + readyzScript(c, ep, timeout)
	for _, h := range c.ControlPlaneHosts() {
		out, err := askKube(ctx, d, h, cmd, timeout)
		if err != nil {
			p.Debugf("%s: kubernetes status: %v", h.Name, err)
			ks.Unreachable = append(ks.Unreachable, h.Name+": "+err.Error())
			continue
		}
		state, readyz, perr := splitKubeOutput(out)
		if perr != nil {
			ks.Unreachable = append(ks.Unreachable, h.Name+": "+perr.Error())
			continue
		}
		ks.Via, ks.Readyz, ks.Unreachable = h.Name, readyz, nil
		ks.fill(c, state)
		return ks
	}
	ks.Problems = []string{"no control-plane host answered: " + strings.Join(ks.Unreachable, "; ")}
	return ks
}

func askKube(ctx context.Context, d *provision.Dialer, h v1alpha1.Host, cmd string, timeout time.Duration) ([]byte, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	cli, err := d.Dial(dctx, provision.TargetOf(h))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	rctx, cancel2 := context.WithTimeout(ctx, 4*timeout+5*time.Second)
	defer cancel2()
	res, err := cli.Run(rctx, "status/kubernetes", cmd)
	if err != nil && len(res.Stdout) == 0 {
		return nil, err
	}
	return res.Stdout, nil
}

// splitKubeOutput separates the state documents from the readyz lines.
func splitKubeOutput(out []byte) (kubenode.ClusterState, map[string]string, error) {
	s := string(out)
	i := strings.LastIndex(s, "\n---\n")
	if i < 0 {
		return kubenode.ClusterState{}, nil, fmt.Errorf("the API did not answer (kubectl printed %d bytes)", len(out))
	}
	st, err := kubenode.ParseClusterState([]byte(s[:i+1]))
	if err != nil {
		return st, nil, err
	}
	readyz := map[string]string{}
	for _, line := range strings.Split(s[i+5:], "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) == 3 && f[0] == "readyz" {
			readyz[f[1]] = strings.TrimSpace(f[2])
		}
	}
	return st, readyz, nil
}

func (ks *KubeStatus) fill(c *v1alpha1.Cluster, st kubenode.ClusterState) {
	for _, h := range c.KubeNodes() {
		n := KubeNode{Name: h.Name, Role: "worker"}
		if h.HasRole(v1alpha1.RoleControlPlane) {
			n.Role = "control-plane"
			pods := map[string]bool{}
			for _, comp := range kubenode.StaticPods {
				if ready, ok := st.Pods[comp+"-"+h.Name]; ok {
					pods[comp] = ready
				}
			}
			ks.StaticPods[h.Name] = pods
		}
		if ns, ok := st.Nodes[h.Name]; ok {
			n.Registered, n.Ready, n.Version, n.Zone, n.PodCIDR = true, ns.Ready, ns.KubeletVersion, ns.Zone, ns.PodCIDR
		}
		ks.Nodes = append(ks.Nodes, n)
	}
	ks.Problems = st.Problems(c)
	var names []string
	for name := range ks.Readyz {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if ks.Readyz[name] != "ok" {
			what := "apiserver on " + name
			if name == "vip" {
				what = "the API through " + ks.Endpoint
			}
			ks.Problems = append(ks.Problems, what+" /readyz: "+ks.Readyz[name])
		}
	}
}

func (r *Report) addKube(ks *KubeStatus) {
	if ks == nil {
		return
	}
	r.Kubernetes = ks
	for _, p := range ks.Problems {
		r.Problems = append(r.Problems, "kubernetes: "+p)
	}
	r.Healthy = len(r.Problems) == 0
}

// printKube prints the Kubernetes section: nodes, static pods per control plane, /readyz.
func printKube(w io.Writer, ks *KubeStatus) {
	fmt.Fprintf(w, "\nkubernetes: through %s (asked on %s)\n", ks.Endpoint, dash(ks.Via))
	if ks.Via == "" {
		for _, u := range ks.Unreachable {
			fmt.Fprintf(w, "  %s\n", u)
		}
		return
	}
	var rows [][]string
	for _, n := range ks.Nodes {
		ready := "Ready"
		switch {
		case !n.Registered:
			ready = "NOT REGISTERED"
		case !n.Ready:
			ready = "NotReady"
		}
		pods := "-"
		if sp, ok := ks.StaticPods[n.Name]; ok {
			var ps []string
			for _, comp := range kubenode.StaticPods {
				st := "missing"
				if ready, ok := sp[comp]; ok {
					st = "Ready"
					if !ready {
						st = "NOT READY"
					}
				}
				ps = append(ps, strings.TrimPrefix(comp, "kube-")+" "+st)
			}
			pods = strings.Join(ps, ", ")
		}
		readyz := "-"
		if v, ok := ks.Readyz[n.Name]; ok {
			readyz = v
			if v != "ok" {
				readyz = "FAILED" // the reason is in the problems below
			}
		}
		rows = append(rows, []string{"  " + n.Name, n.Role, ready, dash(n.Version), dash(n.Zone), dash(n.PodCIDR), readyz, pods})
	}
	ui.Table(w, []string{"  NODE", "ROLE", "STATUS", "VERSION", "ZONE", "POD-CIDR", "READYZ", "STATIC PODS"}, rows)
	fmt.Fprintf(w, "  /readyz through %s: %s\n", ks.Endpoint, dash(ks.Readyz["vip"]))
}
