//go:build e2e

package lbe2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/status"
)

// userLB is "the user's load balancer" for TestExternalLoadBalancer: a plain HAProxy the test
// itself runs on lb-b (hactl's HAProxy and Keepalived there stopped first), TCP to the three
// apiservers with a 1 s connect check, as docs/real-hosts.md asks of an external load balancer.
const (
	userLBHost    = "lb-b"
	userLBAddress = "172.28.0.22"
	userLBUnit    = "hactl-e2e-user-lb"
	userLBConfig  = `global
  maxconn 4096
defaults
  mode tcp
  timeout connect 1s
  timeout client 1m
  timeout server 1m
  timeout check 1s
  retries 2
  option redispatch
frontend kube-apiserver
  bind :6443
  default_backend apiservers
backend apiservers
  balance roundrobin
  default-server inter 1s fall 2 rise 2
  server cp-a 172.28.0.11:6443 check
  server cp-b 172.28.0.12:6443 check
  server cp-c 172.28.0.13:6443 check
`
)

// externalStatus runs `hactl status -o json` and returns its externalLoadBalancer section, the
// problems and the exit code.
func externalStatus(t *testing.T, spec string) (*status.ExternalLBStatus, []string, int) {
	t.Helper()
	r := suite.HactlQuiet(t, "status", "-f", spec, "-o", "json")
	var rep struct {
		ExternalLB   *status.ExternalLBStatus `json:"externalLoadBalancer"`
		LoadBalancer any                      `json:"loadBalancer"`
		Problems     []string                 `json:"problems"`
	}
	harness.DecodeJSON(t, r, &rep)
	if rep.LoadBalancer != nil {
		t.Errorf("status of an external load balancer has hactl's loadBalancer section: %v", rep.LoadBalancer)
	}
	if rep.ExternalLB == nil {
		t.Fatalf("status -o json has no externalLoadBalancer section:\n%s", r.Stdout)
	}
	return rep.ExternalLB, rep.Problems, r.Code
}

// privateAddrs are cp-a/b/c's addresses on the lab's internal network in TestExternalLoadBalancer:
// kubelet's and etcd's peers' network, while hactl and the load balancer use the lab network.
var privateAddrs = map[string]string{"cp-a": "172.29.0.51", "cp-b": "172.29.0.52", "cp-c": "172.29.0.53"}

// TestExternalLoadBalancer: the user's own load balancer (spec.loadBalancer.external) in front of
// a Kubernetes control plane hactl builds on fresh cp-a/b/c, whose kubelets and etcd peers talk
// over a second network (hosts[*].privateAddress): hactl installs no HAProxy or Keepalived, kubeadm
// and the kubeconfig use the load balancer's address, the nodes' InternalIP and pod routes are the
// private addresses, status asks readyz through the load balancer, and drill lb-failover cuts a
// backend off it and measures. Bad input (external with Keepalived fields) is exit 2 before any
// host is contacted.
func TestExternalLoadBalancer(t *testing.T) {
	ctx := context.Background()
	extSpec := func(t *testing.T) *v1alpha1.Cluster {
		c := suite.Spec(t, 3)
		c.Spec.Hosts = slices.DeleteFunc(c.Spec.Hosts, func(h v1alpha1.Host) bool { return !h.HasRole(v1alpha1.RoleControlPlane) })
		c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{External: &v1alpha1.ExternalLoadBalancer{Address: userLBAddress}}
		for i := range c.Spec.Hosts {
			c.Spec.Hosts[i].PrivateAddress = privateAddrs[c.Spec.Hosts[i].Name]
		}
		c.Spec.StateDir = filepath.Join(suite.Lab.Dir(), "state-external")
		if err := lab.WithKubernetes(c, suite.Lab.Dir(), filepath.Join(suite.RepoRoot, "bin"), false); err != nil {
			t.Fatal(err)
		}
		c.Spec.Kubernetes.NodeSubnet = lab.InternalSubnet // the bridge CNI's one L2 segment: the private addresses'
		return c
	}
	var spec string
	kubeCA := filepath.Join(suite.Lab.Dir(), "external-kubernetes-ca.crt")
	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"external with Keepalived fields or an lb host is exit 2 before any host is contacted", func(t *testing.T) {
			for _, tc := range []struct {
				edit func(*v1alpha1.Cluster)
				want string
			}{
				{func(c *v1alpha1.Cluster) { c.Spec.LoadBalancer.VIP = "172.28.0.100/24" }, "spec.loadBalancer.vip: Forbidden"},
				{func(c *v1alpha1.Cluster) { c.Spec.LoadBalancer.Priorities = map[string]int{"cp-a": 150} }, "spec.loadBalancer.priorities: Forbidden"},
				{func(c *v1alpha1.Cluster) { c.Spec.LoadBalancer.External.Address = userLBAddress + ":6443" }, "spec.loadBalancer.external.address"},
				{func(c *v1alpha1.Cluster) {
					c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "lb-a", Address: "172.28.0.21", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
				}, "spec.hosts[3].roles"},
			} {
				c := extSpec(t)
				tc.edit(c)
				refusedLocally(t, harness.WriteSpec(t, c, "bad.yaml"), "cp-a", tc.want)
			}
		}},
		{"the user's HAProxy on lb-b, fresh control-plane hosts", func(t *testing.T) {
			// The lab image carries the haproxy package (its unit disabled); on a host without it, this
			// installs it as a user would.
			suite.ExecOn(t, userLBHost, "sh", "-c", "command -v haproxy >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q haproxy; systemctl disable --now haproxy keepalived 2>/dev/null || true")
			suite.ExecOn(t, userLBHost, "sh", "-c", "mkdir -p /etc/user-lb && cat > /etc/user-lb/haproxy.cfg <<'EOF'\n"+userLBConfig+"EOF\nhaproxy -c -f /etc/user-lb/haproxy.cfg")
			suite.ExecOn(t, userLBHost, "systemd-run", "--unit", userLBUnit, "haproxy", "-db", "-f", "/etc/user-lb/haproxy.cfg")
			// Nothing else in this package bootstraps cp-a/b/c (the kubeadm control plane behind hactl's
			// VIP is tested in e2e/kube): they are as the lab started them, which is checked here
			// instead of recreating them.
			for _, h := range []string{"cp-a", "cp-b", "cp-c"} {
				if out := suite.ExecOn(t, h, "sh", "-c", `for f in /etc/kubernetes/admin.conf /etc/etcd/pki /etc/systemd/system/etcd.service; do if [ -e "$f" ]; then echo "$f"; fi; done`); strings.TrimSpace(out) != "" {
					t.Fatalf("%s is not fresh, it has: %s", h, out)
				}
			}
			for h, a := range privateAddrs {
				if err := suite.Lab.ConnectNetwork(ctx, h, lab.InternalNetworkName, a); err != nil {
					t.Fatal(err)
				}
			}
			spec = harness.WriteSpecIn(t, suite.Lab.Dir(), extSpec(t), "cluster-external.yaml")
		}},
		{"bootstrap builds etcd and the control plane behind the user's load balancer, and no HAProxy or Keepalived", func(t *testing.T) {
			res := suite.BootstrapJSON(t, spec)
			if res.VIP != "" || res.VIPHolder != "" {
				t.Errorf("VIP %q on %q; want none", res.VIP, res.VIPHolder)
			}
			for _, h := range []string{"cp-a", "cp-b", "cp-c"} {
				// The lab image carries the haproxy package's own haproxy.cfg; hactl's says "Written by hactl".
				// The trailing marker proves the checks ran (grep, ls and is-active exit non-zero here).
				out, _ := suite.Lab.Exec(ctx, h, "sh", "-c", "grep -l 'Written by hactl' /etc/haproxy/haproxy.cfg 2>&1; ls /etc/keepalived/keepalived.conf 2>&1; systemctl is-active haproxy keepalived 2>&1; echo checked")
				if !strings.HasSuffix(out, "checked\n") {
					t.Fatalf("%s: the checks did not run:\n%s", h, out)
				}
				if strings.Contains(out, "/etc/haproxy/haproxy.cfg\n") || strings.Contains(out, "/etc/keepalived/keepalived.conf\n") || strings.Contains(out, "\nactive") {
					t.Errorf("%s runs hactl's load balancer:\n%s", h, out)
				}
			}
			cfg := suite.ExecOn(t, "cp-a", "cat", "/etc/kubernetes/admin.conf")
			if !strings.Contains(cfg, "server: https://"+userLBAddress+":6443") {
				t.Errorf("admin.conf does not use the external load balancer:\n%s", cfg)
			}
			san := suite.ExecOn(t, "cp-b", "sh", "-c", "openssl x509 -in /etc/kubernetes/pki/apiserver.crt -noout -ext subjectAltName")
			if !strings.Contains(san, "IP Address:"+userLBAddress) {
				t.Errorf("cp-b's apiserver certificate lacks the load balancer's address:\n%s", san)
			}
			if err := os.WriteFile(kubeCA, []byte(suite.ExecOn(t, "cp-a", "cat", "/etc/kubernetes/pki/ca.crt")), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"hactl kubeconfig reaches the nodes through the user's load balancer", func(t *testing.T) {
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			suite.MustHactl(t, "kubeconfig", "-f", spec, "--out", kc)
			raw, _ := os.ReadFile(kc)
			if !strings.Contains(string(raw), "server: https://"+userLBAddress+":6443") {
				t.Errorf("kubeconfig's server is not the external load balancer:\n%s", raw)
			}
			harness.WaitFor(t, "kubectl get nodes through the user's load balancer", 2*time.Minute, 2*time.Second, func() string {
				out, err := runKubectl(ctx, kc, "get", "nodes", "-o", "name")
				if err != nil || strings.Count(out, "node/") != 3 {
					return fmt.Sprintf("%v: %s", err, out)
				}
				return ""
			})
			// privateAddress carries kubelet's traffic: each node's InternalIP, and the pod routes'
			// next hop to the other nodes.
			out, err := runKubectl(ctx, kc, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}`)
			if err != nil {
				t.Fatal(err)
			}
			for h, a := range privateAddrs {
				if !strings.Contains(out, h+"="+a+"\n") {
					t.Errorf("node %s's InternalIP is not its privateAddress %s:\n%s", h, a, out)
				}
			}
			routes := suite.ExecOn(t, "cp-a", "ip", "route")
			for _, h := range []string{"cp-b", "cp-c"} {
				if !strings.Contains(routes, "via "+privateAddrs[h]) {
					t.Errorf("cp-a has no pod route via %s's privateAddress %s:\n%s", h, privateAddrs[h], routes)
				}
			}
		}},
		{"status asks readyz through the user's load balancer; it going down is exit 3", func(t *testing.T) {
			c := extSpec(t)
			c.Spec.LoadBalancer.HealthCheck.CAFile = kubeCA
			spec = harness.WriteSpecIn(t, suite.Lab.Dir(), c, "cluster-external.yaml")
			harness.WaitFor(t, "status healthy with readyz ok through the user's load balancer", 3*time.Minute, 2*time.Second, func() string {
				st, problems, code := externalStatus(t, spec)
				if code != 0 || st.Readyz != "ok" || !st.Verified || st.Endpoint != userLBAddress+":6443" {
					return fmt.Sprintf("exit %d, %+v, problems %v", code, st, problems)
				}
				return ""
			})
			suite.ExecOn(t, userLBHost, "systemctl", "stop", userLBUnit)
			st, problems, code := externalStatus(t, spec)
			suite.ExecOn(t, userLBHost, "systemd-run", "--unit", userLBUnit, "haproxy", "-db", "-f", "/etc/user-lb/haproxy.cfg")
			if code != 3 || st.Readyz == "ok" || !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "spec.loadBalancer.external") }) {
				t.Errorf("with the user's load balancer stopped: exit %d, %+v, problems %v; want 3 naming it", code, st, problems)
			}
			harness.WaitFor(t, "readyz back through the user's load balancer", time.Minute, time.Second, func() string {
				if st, _, _ := externalStatus(t, spec); st.Readyz != "ok" {
					return st.Readyz
				}
				return ""
			})
		}},
		{"drill lb-failover cuts cp-b off the user's load balancer, measures readyz through it and puts it back", func(t *testing.T) {
			if r := suite.Hactl(t, "drill", "lb-failover", "-f", spec, "--component", "haproxy", "--yes"); r.Code != 2 || !strings.Contains(r.Stderr, "spec.loadBalancer.external") {
				t.Errorf("--component haproxy with an external load balancer: exit %d, want 2:\n%s", r.Code, r.Stderr)
			}
			rp := filepath.Join(t.TempDir(), "drill.json")
			r := suite.Hactl(t, "drill", "lb-failover", "-f", spec, "--backend", "cp-b", "--hold", "8s", "--yes", "--report", rp)
			var rep drill.Report
			if err := harness.ReadJSON(rp, &rep); r.Code != 0 || err != nil || len(rep.Iterations) != 1 {
				t.Fatalf("exit %d, report %v; want 0 and one iteration:\n%s", r.Code, err, r.Stderr)
			}
			it := rep.Iterations[0]
			if rep.Component != drill.ComponentAPIServer || !slices.Equal(it.Targets, []string{"cp-b"}) || it.RTOMs == nil || it.VIPBefore != "" {
				t.Errorf("report: component %s, targets %v, RTO measured %v, VIP %q; want kube-apiserver, [cp-b], measured, none", rep.Component, it.Targets, it.RTOMs != nil, it.VIPBefore)
			} else {
				t.Logf("cp-b cut off the user's load balancer (1 s checks, fall 2): requests failed for %.0f ms (%d failed)", *it.RTOMs, it.ReadyzFailures)
			}
			if out := suite.ExecOn(t, "cp-b", "sh", "-c", "iptables -S | grep -c HACTL-DRILL || true"); strings.TrimSpace(out) != "0" {
				t.Errorf("cp-b keeps the drill's iptables rules: %s", out)
			}
			if st, problems, code := externalStatus(t, spec); code != 0 || st.Readyz != "ok" {
				t.Errorf("after the drill: exit %d, %+v, %v", code, st, problems)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			t.Fatalf("step %q failed; later steps depend on it", s.name)
		}
	}
}

// runKubectl runs the lab's kubectl with kubeconfig kc.
func runKubectl(ctx context.Context, kc string, args ...string) (string, error) {
	return suite.Lab.KubectlWith(ctx, kc, args...)
}
