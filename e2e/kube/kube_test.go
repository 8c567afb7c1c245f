//go:build e2e

package kubee2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/report"
)

// kubeNodes are the lab's Kubernetes nodes and their zones.
var kubeNodes = map[string]string{"cp-a": "az-a", "cp-b": "az-b", "cp-c": "az-c", "w-a": "az-a", "w-b": "az-b", "w-c": "az-c"}

func sortedNodes() []string {
	var out []string
	for n := range kubeNodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// labSpec reads the lab's Kubernetes spec (cluster-3.yaml, as the lab wrote it) to change.
func labSpec(t *testing.T) *v1alpha1.Cluster {
	t.Helper()
	c, err := lab.ReadSpec(suite.Lab.SpecPath(3))
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Kubernetes == nil {
		t.Fatal("the lab's spec has no spec.kubernetes")
	}
	return c
}

// kubectl runs kubectl through the VIP with the kubeconfig hactl made; a failure fails the test.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := suite.Lab.Kubectl(context.Background(), args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// rolloutStatus waits for a Deployment's rollout; when it does not finish, the test fails with what
// the cluster says about the Deployment's pods (states, describe, the namespace's recent events), so a
// failure in CI names its cause.
func rolloutStatus(t *testing.T, namespace, deployment, selector, timeout string) {
	t.Helper()
	ctx := context.Background()
	out, err := suite.Lab.Kubectl(ctx, "rollout", "status", "-n", namespace, "deployment/"+deployment, "--timeout", timeout)
	if err == nil {
		return
	}
	var diag strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-n", namespace, "-l", selector, "-o", "wide"},
		{"describe", "pods", "-n", namespace, "-l", selector},
		{"get", "events", "-n", namespace, "--sort-by", ".lastTimestamp"},
		{"get", "nodes", "-o", "wide"},
	} {
		o, err := suite.Lab.Kubectl(ctx, args...)
		fmt.Fprintf(&diag, "\n$ kubectl %s (err %v)\n%s", strings.Join(args, " "), err, o)
	}
	t.Fatalf("kubectl rollout status deployment/%s --timeout %s: %v\n%s%s", deployment, timeout, err, out, diag.String())
}

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// readyNodes maps node name → Ready (through the VIP); "" on success, else what is wrong.
func readyNodes(names ...string) string {
	out, err := suite.Lab.Kubectl(context.Background(), "get", "nodes", "-o", "json", "--request-timeout", "10s")
	if err != nil {
		return err.Error()
	}
	var nl nodeList
	if err := json.Unmarshal([]byte(out), &nl); err != nil {
		return err.Error()
	}
	ready := map[string]bool{}
	for _, n := range nl.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" {
				ready[n.Metadata.Name] = c.Status == "True"
			}
		}
	}
	var bad []string
	for _, n := range names {
		if !ready[n] {
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return "not Ready: " + strings.Join(bad, ", ")
	}
	return ""
}

// sshdLog is host's sshd journal (to prove hactl did not connect).
func sshdLog(t *testing.T, host string) string {
	return suite.ExecOn(t, host, "journalctl", "-u", "ssh", "--no-pager", "-q", "-o", "cat")
}

func unitPID(t *testing.T, host, unit string) string {
	return strings.TrimSpace(suite.ExecOn(t, host, "systemctl", "show", "-p", "MainPID", "--value", unit))
}

func hostReport(res report.Cluster, name string) (report.Host, bool) {
	for _, h := range res.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return report.Host{}, false
}

// testKubernetes is TestKube's first phase, one story in order (each step needs the previous one):
// bad specs are refused before any host is contacted; a kubelet download with a wrong sha256 is
// refused before anything is installed; one bootstrap builds etcd, the load balancer (the VIP on
// lb-a), 3 control planes and 3 workers; a Deployment on the workers reaches kubernetes.default; a
// re-run changes nothing, restarts no kubelet or containerd and reloads no HAProxy or Keepalived;
// a stopped kubelet is started; a killed control plane is ridden out and comes back; a worker is
// reset and joins again; an interrupted join converges.
func testKubernetes(t *testing.T) {
	ctx := context.Background()
	var spec string // the spec of the cluster (kubelet downloaded from the mirror), from step 3 on
	steps := []step{
		{"bad Kubernetes specs exit 2 naming the field before any host is contacted", func(t *testing.T) {
			badKubelet := filepath.Join(t.TempDir(), "kubelet.yaml")
			if err := os.WriteFile(badKubelet, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 10\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				edit func(c *v1alpha1.Cluster)
				want string
			}{
				{"kubelet newer than the control plane", func(c *v1alpha1.Cluster) { c.Spec.Kubernetes.KubeletVersion = "v1.38.0" }, "spec.kubernetes.kubeletVersion"},
				{"kubelet four minors older", func(c *v1alpha1.Cluster) { c.Spec.Kubernetes.KubeletVersion = "v1.33.0" }, "spec.kubernetes.kubeletVersion"},
				{"pod subnet overlaps the service subnet", func(c *v1alpha1.Cluster) { c.Spec.Kubernetes.PodSubnet = "10.96.0.0/16" }, "spec.kubernetes.podSubnet"},
				{"pod subnet holds the hosts' network", func(c *v1alpha1.Cluster) { c.Spec.Kubernetes.PodSubnet = "172.28.0.0/16" }, "spec.kubernetes.podSubnet"},
				{"pod subnet too small for the nodes", func(c *v1alpha1.Cluster) { c.Spec.Kubernetes.PodSubnet = "10.244.0.0/22" }, "spec.kubernetes.podSubnet"},
				{"workers without a control plane", func(c *v1alpha1.Cluster) {
					for i := range c.Spec.Hosts {
						if slices.Contains(c.Spec.Hosts[i].Roles, v1alpha1.RoleControlPlane) {
							c.Spec.Hosts[i].Roles = []v1alpha1.Role{v1alpha1.RoleEtcd}
						}
					}
				}, "workers join a control plane"},
				{"an image archive missing", func(c *v1alpha1.Cluster) {
					c.Spec.Kubernetes.ImageArchives = append(c.Spec.Kubernetes.ImageArchives, "/nonexistent/images.tar")
				}, "spec.kubernetes.imageArchives[" + fmt.Sprint(len(labSpec(t).Spec.Kubernetes.ImageArchives)) + "]"},
				{"the archives lack an image kubeadm needs", func(c *v1alpha1.Cluster) {
					c.Spec.Kubernetes.ImageArchives = slices.DeleteFunc(c.Spec.Kubernetes.ImageArchives, func(a string) bool { return strings.HasSuffix(a, "/kube-proxy.tar") })
				}, "registry.k8s.io/kube-proxy:" + lab.KubernetesVersion},
				{"cni bridge with nodes in different subnets", func(c *v1alpha1.Cluster) { c.Spec.Kubernetes.NodeSubnet = "172.28.0.0/28" }, "one L2 segment"},
				{"an unknown field in the kubelet configuration", func(c *v1alpha1.Cluster) { c.Spec.Kubernetes.KubeletConfigurationFile = badKubelet }, `unknown field "maxPodz"`},
				{"several control planes without a load balancer", func(c *v1alpha1.Cluster) { lab.WithoutLoadBalancer(c) }, "spec.loadBalancer: Required value"},
			} {
				c := labSpec(t)
				tc.edit(c)
				p := harness.WriteSpec(t, c, "bad.yaml")
				before := sshdLog(t, "w-a")
				r := suite.Hactl(t, "bootstrap", "-f", p)
				if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
					t.Errorf("%s: exit %d; want 2 naming %s:\n%s", tc.name, r.Code, tc.want, r.Stderr)
				}
				if after := sshdLog(t, "w-a"); after != before {
					t.Errorf("%s: w-a's sshd saw a connection for an invalid spec:\n%s", tc.name, strings.TrimPrefix(after, before))
				}
			}
		}},
		{"a kubelet download with a wrong sha256 is refused before anything is installed", func(t *testing.T) {
			c := labSpec(t)
			dl, err := suite.Lab.KubeDownload("kubelet")
			if err != nil {
				t.Fatal(err)
			}
			dl.SHA256 = strings.Repeat("0", 64)
			c.Spec.Kubernetes.Binaries.Kubelet, c.Spec.Kubernetes.Download.Kubelet = "", dl
			r := suite.Hactl(t, "bootstrap", "-f", harness.WriteSpec(t, c, "wrong-sha.yaml"))
			if r.Code != 1 || !strings.Contains(r.Stderr, "spec.kubernetes.download.kubelet.sha256") || !strings.Contains(r.Stderr, "nothing was installed") {
				t.Fatalf("exit %d; want 1 naming the wrong sha256:\n%s", r.Code, r.Stderr)
			}
			for _, n := range sortedNodes() {
				if out := suite.ExecOn(t, n, "ls", "/usr/local/bin/", "/etc/systemd/system/"); strings.Contains(out, "kubelet") ||
					strings.Contains(out, "kubeadm") || strings.Contains(out, "etcd") || strings.Contains(out, "hactl-stage") {
					t.Errorf("%s: something was installed:\n%s", n, out)
				}
			}
			for _, h := range lab.LBHosts {
				if suite.Exists(t, h, "/etc/keepalived/keepalived.conf") {
					t.Errorf("%s: keepalived.conf was written", h)
				}
			}
		}},
		{"one bootstrap builds etcd, the load balancer, 3 control planes and 3 workers, Ready through the VIP", func(t *testing.T) {
			c := labSpec(t)
			dl, err := suite.Lab.KubeDownload("kubelet")
			if err != nil {
				t.Fatal(err)
			}
			// kubelet fetched by every node from the mirror (sha256 checked there), kubeadm and
			// kubectl uploaded from this machine.
			c.Spec.Kubernetes.Binaries.Kubelet, c.Spec.Kubernetes.Download.Kubelet = "", dl
			spec = harness.WriteSpecIn(t, suite.Lab.Dir(), c, "cluster-kube.yaml")
			start := time.Now()
			res := suite.BootstrapJSON(t, spec)
			t.Logf("fresh bootstrap took %s", time.Since(start).Round(100*time.Millisecond))
			if res.VIP != lab.VIP || res.VIPHolder != "lb-a" {
				t.Errorf("VIP %s on %q; want %s on lb-a (highest priority)", res.VIP, res.VIPHolder, lab.VIP)
			}
			for _, h := range res.Hosts {
				if h.Action != "changed" {
					t.Errorf("%s: %s on a fresh lab", h.Name, h.Action)
				}
			}
			if h, _ := hostReport(res, "cp-a"); !slices.Contains(h.Changes, "kubeadm init") {
				t.Errorf("cp-a: changes %v, want kubeadm init", h.Changes)
			}
			suite.MustHactl(t, "kubeconfig", "-f", spec, "--out", suite.Lab.Kubeconfig())
			if fi, err := os.Stat(suite.Lab.Kubeconfig()); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("kubeconfig %v %v, want mode 0600", fi, err)
			}
			if msg := readyNodes(sortedNodes()...); msg != "" {
				t.Fatal(msg)
			}
			var nl nodeList
			if err := json.Unmarshal([]byte(kubectl(t, "get", "nodes", "-o", "json")), &nl); err != nil {
				t.Fatal(err)
			}
			for _, n := range nl.Items {
				if z := n.Metadata.Labels["topology.kubernetes.io/zone"]; z != kubeNodes[n.Metadata.Name] {
					t.Errorf("%s: zone label %q, want %q", n.Metadata.Name, z, kubeNodes[n.Metadata.Name])
				}
			}
			if out := kubectl(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); !strings.Contains(out, "hactl-admin") || !strings.Contains(out, "kubeadm:cluster-admins") {
				t.Errorf("kubeconfig user: %s", out)
			}
			r := suite.MustHactl(t, "status", "-f", spec)
			for _, n := range sortedNodes() {
				if !strings.Contains(r.Stdout, n) {
					t.Errorf("status lacks node %s", n)
				}
			}
		}},
		{"a Deployment's pods run on the workers, one per zone, and reach kubernetes.default through kube-proxy", func(t *testing.T) {
			img, err := lab.ProbeImage(suite.RepoRoot)
			if err != nil {
				t.Fatal(err)
			}
			manifest := filepath.Join(suite.Lab.Dir(), "probe.yaml") // kubectl -f splits at commas, which test temp dirs have
			if err := os.WriteFile(manifest, []byte(probeDeployment(img)), 0o644); err != nil {
				t.Fatal(err)
			}
			kubectl(t, "apply", "-f", manifest)
			rolloutStatus(t, "default", "probe", "app=probe", "180s")
			var pl struct {
				Items []struct {
					Spec   struct{ NodeName string } `json:"spec"`
					Status struct {
						Conditions []struct{ Type, Status string } `json:"conditions"`
					} `json:"status"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(kubectl(t, "get", "pods", "-l", "app=probe", "-o", "json")), &pl); err != nil {
				t.Fatal(err)
			}
			zones := map[string]bool{}
			for _, p := range pl.Items {
				if !strings.HasPrefix(p.Spec.NodeName, "w-") {
					t.Errorf("a pod on %s, want workers only", p.Spec.NodeName)
				}
				zones[kubeNodes[p.Spec.NodeName]] = true
			}
			if len(pl.Items) != 3 || len(zones) != 3 {
				t.Errorf("%d pods in zones %v, want 3 in az-a, az-b, az-c", len(pl.Items), zones)
			}
			logs := kubectl(t, "logs", "-l", "app=probe", "--tail", "20", "--prefix")
			if !strings.Contains(logs, "ok: /readyz through the ClusterIP and through kubernetes.default.svc") {
				t.Errorf("the pods did not reach kubernetes.default:\n%s", logs)
			}
		}},
		{"a re-run runs no kubeadm command, restarts nothing and reloads nothing", func(t *testing.T) {
			before := map[string]string{}
			for _, n := range sortedNodes() {
				before[n] = unitPID(t, n, "kubelet") + "/" + unitPID(t, n, "containerd")
			}
			for _, h := range lab.LBHosts {
				before[h] = lbProcesses(t, h)
			}
			res := suite.BootstrapJSON(t, spec)
			for _, h := range res.Hosts {
				// Two commands: the connect probe and the facts command; no kubeadm, no kubectl.
				if h.Action != "unchanged" || h.Commands != 2 {
					t.Errorf("%s: %s %v, %d SSH commands; want unchanged with 2", h.Name, h.Action, h.Changes, h.Commands)
				}
			}
			for _, n := range sortedNodes() {
				if now := unitPID(t, n, "kubelet") + "/" + unitPID(t, n, "containerd"); now != before[n] {
					t.Errorf("%s: kubelet/containerd PIDs %s became %s", n, before[n], now)
				}
			}
			for _, h := range lab.LBHosts {
				if now := lbProcesses(t, h); now != before[h] {
					t.Errorf("%s: PIDs/mtimes %q became %q on a no-op re-run", h, before[h], now)
				}
			}
		}},
		{"a stopped kubelet is started by a re-run", func(t *testing.T) {
			suite.ExecOn(t, "w-a", "systemctl", "stop", "kubelet")
			res := suite.BootstrapJSON(t, spec)
			if h, _ := hostReport(res, "w-a"); !slices.Equal(h.Changes, []string{"start kubelet"}) {
				t.Errorf("w-a: changes %v, want [start kubelet]", h.Changes)
			}
			if s := strings.TrimSpace(suite.ExecOn(t, "w-a", "systemctl", "is-active", "kubelet")); s != "active" {
				t.Errorf("kubelet on w-a is %s", s)
			}
			harness.WaitFor(t, "w-a Ready", time.Minute, 2*time.Second, func() string { return readyNodes("w-a") })
		}},
		{"a control-plane host killed: the API answers through the VIP, status names the NotReady node; Ready again after it starts", func(t *testing.T) {
			if err := suite.Lab.Kill(ctx, "cp-b"); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			harness.WaitFor(t, "the API through the VIP", time.Minute, time.Second, func() string {
				if out, err := suite.Lab.Kubectl(ctx, "get", "--raw", "/readyz", "--request-timeout", "5s"); err != nil || strings.TrimSpace(out) != "ok" {
					return fmt.Sprintf("%q %v", out, err)
				}
				return ""
			})
			harness.WaitFor(t, "status naming cp-b NotReady", 3*time.Minute, 3*time.Second, func() string {
				r := suite.HactlQuiet(t, "status", "-f", spec)
				if r.Code == 3 && strings.Contains(r.Stdout, "cp-b NotReady") {
					return ""
				}
				return fmt.Sprintf("exit %d: %s", r.Code, lastLines(r.Stdout, 3))
			})
			t.Logf("status named cp-b NotReady %s after the kill", time.Since(killed).Round(time.Second))
			if err := suite.Lab.Start(ctx, "cp-b"); err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			harness.WaitFor(t, "status healthy again", 4*time.Minute, 3*time.Second, func() string {
				r := suite.HactlQuiet(t, "status", "-f", spec)
				if r.Code == 0 {
					return ""
				}
				return fmt.Sprintf("exit %d: %s", r.Code, lastLines(r.Stdout, 3))
			})
			t.Logf("cp-b Ready and every check green %s after its start", time.Since(started).Round(time.Second))
		}},
		{"a reset worker leaves the cluster; added back to the spec, it joins", func(t *testing.T) {
			// A pod with a hostPort on w-c: the pod network's plugins (bridge, portmap) make chains
			// the reset must remove (afterReset checks), portmap's shared ones among them.
			overrides := `{"spec":{"nodeName":"w-c","containers":[{"name":"hostport","image":"registry.k8s.io/pause:3.10.2","imagePullPolicy":"Never","ports":[{"containerPort":80,"hostPort":18080}]}]}}`
			if out, err := suite.Lab.Kubectl(ctx, "run", "hostport", "--image", "registry.k8s.io/pause:3.10.2", "--overrides", overrides); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if out, err := suite.Lab.Kubectl(ctx, "wait", "--for", "condition=Ready", "pod/hostport", "--timeout", "90s"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if out := suite.ExecOn(t, "w-c", "iptables-save", "-t", "nat"); !strings.Contains(out, ":CNI-HOSTPORT-DNAT") || !strings.Contains(out, `name: \"hactl-bridge\"`) {
				t.Fatalf("w-c: no hostPort chains for the pod on hactl-bridge, nothing for the reset to remove:\n%s", out)
			}
			r := suite.MustHactl(t, "reset", "-f", spec, "--hosts", "w-c", "--yes")
			if !strings.Contains(r.Stdout, "drain Node w-c") {
				t.Errorf("no plan shown:\n%s", r.Stdout)
			}
			if out, err := suite.Lab.Kubectl(ctx, "get", "node", "w-c"); err == nil {
				t.Errorf("Node w-c still there:\n%s", out)
			}
			if out, _ := suite.Lab.Exec(ctx, "w-c", "sh", "-c", "ls /usr/local/bin /etc/cni/net.d; systemctl is-active kubelet; ls /var/lib/hactl/backup"); strings.Contains(out, "kubelet\n") ||
				strings.Contains(out, "hactl-bridge") || !strings.Contains(out, "inactive") || !strings.Contains(out, "etc-kubernetes-") {
				t.Errorf("w-c after reset:\n%s", out)
			}
			afterReset(t, spec, "w-c")
			// Without w-c in the spec: nothing joins, the other nodes only drop their route to it.
			c, err := lab.ReadSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			c.Spec.Hosts = slices.DeleteFunc(c.Spec.Hosts, func(h v1alpha1.Host) bool { return h.Name == "w-c" })
			res := suite.BootstrapJSON(t, harness.WriteSpec(t, c, "without-w-c.yaml"))
			for _, h := range res.Hosts {
				if h.Name == "w-c" || slices.ContainsFunc(h.Changes, func(s string) bool { return s != "pod network" }) {
					t.Errorf("%s: %v without w-c in the spec", h.Name, h.Changes)
				}
			}
			res = suite.BootstrapJSON(t, spec)
			if h, _ := hostReport(res, "w-c"); !slices.Contains(h.Changes, "kubeadm join") {
				t.Errorf("w-c: %v, want a join", h.Changes)
			}
			harness.WaitFor(t, "w-c Ready", time.Minute, 2*time.Second, func() string { return readyNodes("w-c") })
		}},
		{"a bootstrap interrupted during kube/join converges on the next run", func(t *testing.T) {
			suite.MustHactl(t, "reset", "-f", spec, "--hosts", "w-b", "--yes")
			cmd := suite.Command(t, "bootstrap", "-f", spec)
			progress, err := cmd.StdoutPipe() // the phase lines; errors go to stderr
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 1000)
			go func() {
				sc := bufio.NewScanner(progress)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var out []string
			inJoin := false
			deadline := time.After(3 * time.Minute)
		wait:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						break wait
					}
					out = append(out, l)
					inJoin = inJoin || strings.HasPrefix(l, "[kube/join]")
				case <-deadline:
					t.Fatalf("kube/join never started:\n%s", strings.Join(out, "\n"))
				case <-time.After(50 * time.Millisecond):
				}
				if inJoin {
					if _, err := suite.Lab.Exec(ctx, "w-b", "test", "-e", "/etc/kubernetes/bootstrap-kubelet.conf"); err == nil {
						break
					}
				}
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			for l := range lines {
				out = append(out, l)
			}
			werr := cmd.Wait()
			t.Logf("interrupted bootstrap (%v):\n%s\n--- stderr\n%s", werr, strings.Join(out, "\n"), stderr.String())
			if werr == nil {
				t.Fatal("the interrupted bootstrap exited 0")
			}
			if suite.Exists(t, "w-b", "/var/lib/hactl/kube/node") {
				t.Fatal("w-b's join finished before the interrupt took effect (hactl's marker is there): nothing to converge")
			}
			res := suite.BootstrapJSON(t, spec)
			h, _ := hostReport(res, "w-b")
			if !slices.Contains(h.Changes, "kubeadm reset") || !slices.Contains(h.Changes, "kubeadm join") {
				t.Errorf("w-b: %v, want kubeadm reset then join", h.Changes)
			}
			harness.WaitFor(t, "every node Ready", time.Minute, 2*time.Second, func() string { return readyNodes(sortedNodes()...) })
			rolloutStatus(t, "default", "probe", "app=probe", "120s")
		}},
		{"every kubelet sees its own node's cgroups only", func(t *testing.T) {
			// With one cgroup hierarchy for all nodes, each kubelet tried to remove the others' pod
			// cgroups ("Failed to destroy orphaned pod cgroup", thousands of lines). A node that was
			// reset may log its own old pods' volumes being cleaned up: that is not this.
			for _, n := range sortedNodes() {
				out := suite.ExecOn(t, n, "sh", "-c", "journalctl -u kubelet --no-pager -q | grep -i 'orphaned pod cgroup' | tail -3 || true")
				if strings.TrimSpace(out) != "" {
					t.Errorf("%s: kubelet removes pod cgroups that are not its node's:\n%s", n, out)
				}
				if other := suite.ExecOn(t, n, "sh", "-c", "journalctl -u kubelet --no-pager -q | grep -i 'orphaned pod' | tail -3 || true"); strings.TrimSpace(other) != "" {
					t.Logf("%s: kubelet's other lines about orphaned pods:\n%s", n, other)
				}
			}
		}},
	}
	runSteps(t, steps)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// probeDeployment is 3 replicas of the probe (e2e/cmd/kube-probe), one per zone, Ready when it
// reaches the API server through the kubernetes Service.
func probeDeployment(image string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: probe
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {app: probe}
  template:
    metadata:
      labels: {app: probe}
    spec:
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: probe}
      containers:
      - name: probe
        image: ` + image + `
        imagePullPolicy: Never
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 2
`
}
