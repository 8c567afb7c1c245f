//go:build e2e

package kubee2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/pki/check"
	"github.com/hactl/hactl/report"
)

// readyzURL is kube-apiserver's readiness endpoint through the VIP (anonymous access is allowed:
// system:public-info-viewer).
var readyzURL = "https://" + lab.VIP + ":6443/readyz"

// lbStatus runs `hactl status -o json` and returns its load balancer section and exit code.
func lbStatus(t *testing.T, spec string) (*lb.Status, int) {
	t.Helper()
	r := suite.HactlQuiet(t, "status", "-f", spec, "-o", "json")
	var rep struct {
		LoadBalancer *lb.Status `json:"loadBalancer"`
	}
	harness.DecodeJSON(t, r, &rep)
	if rep.LoadBalancer == nil {
		t.Fatalf("status -o json has no loadBalancer section")
	}
	return rep.LoadBalancer, r.Code
}

// backendState returns each LB host's view of backend ("lb-a=UP lb-b=DOWN").
func backendState(st *lb.Status, backend string) map[string]string {
	out := map[string]string{}
	for _, h := range st.Hosts {
		for _, b := range h.Backends {
			if b.Name == backend {
				out[h.Host] = b.Status + "/" + b.CheckStatus
			}
		}
	}
	return out
}

// waitBackend waits until every LB host sees backend in state want (UP or DOWN).
func waitBackend(t *testing.T, spec, backend, want string) {
	t.Helper()
	harness.WaitFor(t, "backend "+backend+" "+want+" on every LB host", 90*time.Second, time.Second, func() string {
		st, _ := lbStatus(t, spec)
		states := backendState(st, backend)
		if len(states) != len(lab.LBHosts) {
			return fmt.Sprintf("states %v", states)
		}
		for _, s := range states {
			if !strings.HasPrefix(s, want+"/") && s != want+"/" {
				return fmt.Sprintf("states %v", states)
			}
		}
		return ""
	})
}

func waitHolder(t *testing.T, spec, want string) {
	t.Helper()
	harness.WaitFor(t, "VIP on "+want, 60*time.Second, time.Second, func() string {
		st, _ := lbStatus(t, spec)
		if !slices.Equal(st.Holders, []string{want}) {
			return fmt.Sprintf("holders %v", st.Holders)
		}
		return ""
	})
}

// readyzFrom asks for /readyz through the VIP from inside a lab host (a fresh connection).
func readyzFrom(t *testing.T, host string) (string, error) {
	t.Helper()
	return suite.Lab.Exec(context.Background(), host, "curl", "--silent", "--show-error", "--insecure", "--max-time", "3", readyzURL)
}

// readyzBurst sends n requests through the VIP from this machine, each on a fresh connection (no
// keep-alive: a pooled connection would stick to one backend), and returns the failures.
func readyzBurst(n int) []string {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var fails []string
	for i := 0; i < n; i++ {
		resp, err := client.Get(readyzURL)
		if err != nil {
			fails = append(fails, err.Error())
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
			fails = append(fails, fmt.Sprintf("%d %q", resp.StatusCode, body))
		}
	}
	return fails
}

// waitReadyzOK waits until 20 consecutive requests through the VIP succeed.
func waitReadyzOK(t *testing.T, what string) {
	t.Helper()
	harness.WaitFor(t, what, 90*time.Second, time.Second, func() string {
		if f := readyzBurst(20); len(f) > 0 {
			return fmt.Sprintf("%d of 20 requests failed, e.g. %s", len(f), f[0])
		}
		return ""
	})
}

// lbProcesses is HAProxy's and Keepalived's MainPIDs on host and their configuration files'
// mtimes ("<pid>/<pid>/<mtime>\n<mtime>\n"): a reload, restart or rewrite changes it.
func lbProcesses(t *testing.T, host string) string {
	t.Helper()
	return unitPID(t, host, "haproxy") + "/" + unitPID(t, host, "keepalived") + "/" + suite.ExecOn(t, host, "stat", "-c", "%Y", lb.HAProxyConfigPath, lb.KeepalivedConfigPath)
}

// testLoadBalancer is TestKube's load balancer phase (moved from e2e/lb, whose lab bootstrapped
// the same kubeadm control plane behind the same VIP), on the cluster the kubernetes phase built,
// in order (each step needs the previous one): kube-apiserver's etcd credentials are installed and
// checked by pki check; the control plane runs on hactl's etcd and is served through the VIP, also
// from a host that doesn't hold it; HAProxy then verifies the apiservers with kubeadm's CA; faults
// of an apiserver and of the VIP holder are ridden out; drill lb-failover (VRRPv3 and v2) and drill
// kill-leader measure and put back; a reload that fails is rolled back; etcd is restored from a
// snapshot under the running control plane; a re-run is then a no-op and every node is Ready again.
// From the CA step on, the specs are the lab's etcd + load balancer spec (suite.Spec: no
// spec.kubernetes, no workers), as e2e/lb ran them: hactl leaves the Kubernetes part alone.
func testLoadBalancer(t *testing.T) {
	spec := suite.Lab.SpecPath(3)
	ctx := context.Background()
	steps := []step{
		{"kube-apiserver's etcd credentials on every control plane, checked by pki check (a missing one is exit 3); HAProxy and Keepalived enabled", func(t *testing.T) {
			for _, h := range []string{"cp-a", "cp-b", "cp-c"} {
				out := suite.ExecOn(t, h, "stat", "-c", "%n %a", "/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/apiserver-etcd-client.crt", "/etc/kubernetes/pki/apiserver-etcd-client.key")
				if !strings.Contains(out, "apiserver-etcd-client.key 600") || !strings.Contains(out, "etcd/ca.crt 644") {
					t.Errorf("%s: credentials %s", h, out)
				}
			}
			// pki check reads them on every control-plane host; a missing one is a problem (exit 3).
			var rep check.Report
			harness.DecodeJSON(t, suite.MustHactl(t, "pki", "check", "-f", spec, "-o", "json"), &rep)
			for _, hc := range rep.Hosts {
				var kube []string
				for _, cc := range hc.Certificates {
					if strings.HasPrefix(cc.Path, "/etc/kubernetes/pki/") && cc.SignedByCA {
						kube = append(kube, cc.Path)
					}
				}
				if len(kube) != 2 {
					t.Errorf("pki check of %s: kube-apiserver's etcd certificates signed by the CA: %v, want the CA and the client certificate", hc.Host, kube)
				}
			}
			suite.ExecOn(t, "cp-c", "mv", "/etc/kubernetes/pki/apiserver-etcd-client.crt", "/root/moved.crt")
			r := suite.Hactl(t, "pki", "check", "-f", spec)
			suite.ExecOn(t, "cp-c", "mv", "/root/moved.crt", "/etc/kubernetes/pki/apiserver-etcd-client.crt")
			if r.Code != 3 || !strings.Contains(r.Stdout, "cp-c:/etc/kubernetes/pki/apiserver-etcd-client.crt: missing") {
				t.Errorf("pki check without cp-c's client certificate: exit %d, want 3 naming it", r.Code)
			}
			for _, h := range lab.LBHosts {
				for _, u := range []string{"haproxy", "keepalived"} {
					if s := strings.TrimSpace(suite.ExecOn(t, h, "systemctl", "is-enabled", u)); s != "enabled" {
						t.Errorf("%s: %s is %s, want enabled", h, u, s)
					}
				}
			}
		}},
		{"hactl's kubeadm control plane runs on hactl's etcd and VIP", func(t *testing.T) {
			// kube-apiserver's etcd is hactl's: the apiservers wrote Kubernetes objects into it.
			keys := suite.ExecOn(t, "cp-a", "sh", "-c", "ETCDCTL_API=3 /usr/local/bin/etcdctl --endpoints https://172.28.0.11:2379 "+
				"--cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/apiserver-etcd-client.crt "+
				"--key /etc/kubernetes/pki/apiserver-etcd-client.key get /registry/minions --prefix --keys-only")
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				if !strings.Contains(keys, "/registry/minions/"+n) {
					t.Errorf("etcd has no /registry/minions/%s:\n%s", n, keys)
				}
			}
			waitReadyzOK(t, "readyz through the VIP")
			for _, b := range []string{"cp-a", "cp-b", "cp-c"} {
				waitBackend(t, spec, b, "UP")
			}
		}},
		{"readyz through the VIP from a host that doesn't hold it", func(t *testing.T) {
			out, err := readyzFrom(t, "lb-b")
			if err != nil || strings.TrimSpace(out) != "ok" {
				t.Fatalf("from lb-b: %q, %v", out, err)
			}
		}},
		{"HAProxy verifies the apiservers with kubeadm's CA", func(t *testing.T) {
			// In the lab dir, not t.TempDir(): the later steps keep using the spec and the CA file.
			kubeCA := filepath.Join(suite.Lab.Dir(), "kubernetes-ca.crt")
			if err := os.WriteFile(kubeCA, []byte(suite.ExecOn(t, "cp-a", "cat", "/etc/kubernetes/pki/ca.crt")), 0o644); err != nil {
				t.Fatal(err)
			}
			wrongCA := filepath.Join(suite.Lab.Dir(), "state-3", "pki", "ca.crt") // hactl's etcd CA: signed nothing the apiservers serve
			pids := map[string]string{}
			for _, h := range lab.LBHosts {
				pids[h] = unitPID(t, h, "haproxy")
			}
			for _, tc := range []struct {
				ca, want string
			}{{wrongCA, "DOWN"}, {kubeCA, "UP"}} {
				c := suite.Spec(t, 3)
				c.Spec.LoadBalancer.HealthCheck.CAFile = tc.ca
				caSpec := harness.WriteSpecIn(t, suite.Lab.Dir(), c, "cluster-ca.yaml")
				res := suite.BootstrapJSON(t, caSpec)
				for _, h := range res.Hosts {
					if slices.Contains(h.Roles, "lb") && !slices.Contains(h.Changes, "reload haproxy") {
						t.Errorf("%s: changes %v; want a reload of haproxy", h.Name, h.Changes)
					}
				}
				waitBackend(t, caSpec, "cp-b", tc.want)
				spec = caSpec
			}
			for _, h := range lab.LBHosts {
				if now := unitPID(t, h, "haproxy"); now != pids[h] {
					t.Errorf("%s: haproxy MainPID %s became %s: restarted, not reloaded", h, pids[h], now)
				}
				if !strings.Contains(suite.ExecOn(t, h, "cat", lb.HAProxyConfigPath), "verify required ca-file "+lb.RemoteCAFile) {
					t.Errorf("%s: haproxy.cfg does not verify with %s", h, lb.RemoteCAFile)
				}
			}
			waitReadyzOK(t, "readyz through the VIP with verified backends")
		}},
		{"an apiserver whose static pod is gone is marked DOWN; the VIP keeps serving", func(t *testing.T) {
			suite.ExecOn(t, "cp-b", "mv", "/etc/kubernetes/manifests/kube-apiserver.yaml", "/root/kube-apiserver.yaml")
			defer func() {
				suite.ExecOn(t, "cp-b", "mv", "/root/kube-apiserver.yaml", "/etc/kubernetes/manifests/kube-apiserver.yaml")
				waitBackend(t, spec, "cp-b", "UP")
			}()
			waitBackend(t, spec, "cp-b", "DOWN")
			if f := readyzBurst(30); len(f) > 0 {
				t.Errorf("%d of 30 requests through the VIP failed with cp-b DOWN, e.g. %s", len(f), f[0])
			}
		}},
		{"a hung apiserver (SIGSTOP) is marked DOWN; the VIP keeps serving", func(t *testing.T) {
			suite.ExecOn(t, "cp-c", "pkill", "-STOP", "-x", "kube-apiserver")
			defer func() {
				suite.ExecOn(t, "cp-c", "pkill", "-CONT", "-x", "kube-apiserver")
				waitBackend(t, spec, "cp-c", "UP")
			}()
			waitBackend(t, spec, "cp-c", "DOWN")
			if f := readyzBurst(30); len(f) > 0 {
				t.Errorf("%d of 30 requests through the VIP failed with cp-c hung and DOWN, e.g. %s", len(f), f[0])
			}
		}},
		{"HAProxy stopped on the VIP holder: the VIP moves and requests succeed", func(t *testing.T) {
			waitHolder(t, spec, "lb-a")
			suite.ExecOn(t, "lb-a", "systemctl", "stop", "haproxy")
			waitHolder(t, spec, "lb-b")
			waitReadyzOK(t, "readyz through the VIP on lb-b")
			st, code := lbStatus(t, spec)
			if code != 3 || !strings.Contains(strings.Join(st.Problems, "\n"), "lb-a") {
				t.Errorf("status exit %d problems %v; want 3 naming lb-a's stopped HAProxy", code, st.Problems)
			}
			suite.ExecOn(t, "lb-a", "systemctl", "start", "haproxy")
			waitHolder(t, spec, "lb-a") // preemption: the higher priority takes it back
			waitReadyzOK(t, "readyz through the VIP back on lb-a")
		}},
		{"drill lb-failover: HAProxy, then Keepalived, stopped on the VIP holder; measured and put back", func(t *testing.T) {
			kubeCA := filepath.Join(suite.Lab.Dir(), "kubernetes-ca.crt") // written by the CA step
			for _, component := range []string{"haproxy", "keepalived"} {
				rp := filepath.Join(t.TempDir(), "drill.json")
				r := suite.Hactl(t, "drill", "lb-failover", "-f", spec, "--component", component, "--ca-file", kubeCA, "--hold", "8s", "--yes", "--report", rp)
				var rep drill.Report
				err := harness.ReadJSON(rp, &rep)
				if r.Code != 0 || err != nil || len(rep.Iterations) != 1 {
					t.Fatalf("%s: exit %d, report %v: want 0 and one iteration", component, r.Code, err)
				}
				it := rep.Iterations[0]
				// HAProxy stopped refuses connections until the VIP moves: requests must fail. Keepalived
				// stopped hands the VIP over with a priority-0 advertisement, which can be faster than
				// the 20 ms probe: zero failed requests is a valid outcome there (seen once).
				if it.VIPBefore != "lb-a" || it.VIPAfter != "lb-b" || it.VIPMovedMs == nil || it.RTOMs == nil || (component == "haproxy" && it.ReadyzFailures == 0) || it.SettledOn != "lb-a" {
					t.Errorf("%s: VIP %s → %s (moved measured: %v), readyz back measured: %v after %d failed requests, settled on %s; want lb-a → lb-b, measured, back on lb-a",
						component, it.VIPBefore, it.VIPAfter, it.VIPMovedMs != nil, it.RTOMs != nil, it.ReadyzFailures, it.SettledOn)
				} else {
					t.Logf("%s stopped: VIP moved in %.0f ms, readyz back in %.0f ms (%d failed requests), settled on lb-a %.0f ms after the put-back",
						component, *it.VIPMovedMs, *it.RTOMs, it.ReadyzFailures, *it.SettleMs)
				}
				if rep.Settings.AdvertIntervalMs != 500 || rep.Settings.CheckIntervalMs == 0 {
					t.Errorf("settings %+v: want the advert and check intervals", rep.Settings)
				}
				for _, h := range []string{"lb-a", "lb-b"} {
					if out := suite.ExecOn(t, h, "systemctl", "is-active", "haproxy", "keepalived"); strings.Count(out, "active") != 2 || strings.Contains(out, "inactive") {
						t.Errorf("%s after the drill: %q", h, out)
					}
				}
			}
			waitHolder(t, spec, "lb-a")
			waitReadyzOK(t, "readyz through the VIP after the drills")
		}},
		{"advertInterval 1s runs VRRPv2 (the lab's default 500ms is VRRPv3): the VIP still moves and comes back; back to the default after", func(t *testing.T) {
			conf := suite.ExecOn(t, "lb-a", "cat", "/etc/keepalived/keepalived.conf")
			if !strings.Contains(conf, "vrrp_version 3") || !strings.Contains(conf, "advert_int 0.5\n") {
				t.Errorf("the default spec: keepalived.conf without vrrp_version 3 and advert_int 0.5:\n%s", conf)
			}
			c := suite.Spec(t, 3)
			c.Spec.LoadBalancer.AdvertInterval.Duration = time.Second
			v2 := harness.WriteSpec(t, c, "vrrp2.yaml")
			suite.MustHactl(t, "bootstrap", "-f", v2)
			for _, h := range []string{"lb-a", "lb-b"} {
				conf := suite.ExecOn(t, h, "cat", "/etc/keepalived/keepalived.conf")
				if strings.Contains(conf, "vrrp_version") || !strings.Contains(conf, "advert_int 1\n") {
					t.Errorf("%s: keepalived.conf is not VRRPv2 with advert_int 1:\n%s", h, conf)
				}
			}
			waitHolder(t, v2, "lb-a")
			kubeCA := filepath.Join(suite.Lab.Dir(), "kubernetes-ca.crt")
			rp := filepath.Join(t.TempDir(), "drill.json")
			r := suite.Hactl(t, "drill", "lb-failover", "-f", v2, "--component", "haproxy", "--ca-file", kubeCA, "--hold", "5s", "--yes", "--report", rp)
			var rep drill.Report
			if err := harness.ReadJSON(rp, &rep); r.Code != 0 || err != nil || len(rep.Iterations) != 1 {
				t.Fatalf("drill lb-failover with VRRPv2: exit %d, report %v", r.Code, err)
			}
			if it := rep.Iterations[0]; it.VIPBefore != "lb-a" || it.VIPAfter != "lb-b" || it.RTOMs == nil || it.SettledOn != "lb-a" || rep.Settings.AdvertIntervalMs != 1000 {
				t.Errorf("VRRPv2: VIP %s → %s, readyz back measured %v, settled on %s, advert %v ms; want lb-a → lb-b, measured, back on lb-a, 1000 ms",
					it.VIPBefore, it.VIPAfter, it.RTOMs != nil, it.SettledOn, rep.Settings.AdvertIntervalMs)
			} else {
				t.Logf("VRRPv2 (advert 1 s), HAProxy stopped: readyz back in %.0f ms", *it.RTOMs)
			}
			suite.MustHactl(t, "bootstrap", "-f", spec)
			if conf := suite.ExecOn(t, "lb-a", "cat", "/etc/keepalived/keepalived.conf"); !strings.Contains(conf, "vrrp_version 3") || !strings.Contains(conf, "advert_int 0.5\n") {
				t.Errorf("back to the default spec: keepalived.conf is not VRRPv3 again:\n%s", conf)
			}
			waitHolder(t, spec, "lb-a")
			waitReadyzOK(t, "readyz through the VIP back on VRRPv3")
		}},
		{"drill kill-leader under the running control plane: nothing lost", func(t *testing.T) {
			rp := filepath.Join(t.TempDir(), "drill.json")
			suite.MustHactl(t, "drill", "kill-leader", "-f", spec, "--hold", "3s", "--yes", "--report", rp)
			var rep drill.Report
			err := harness.ReadJSON(rp, &rep)
			if err != nil || rep.LostWrites != 0 || len(rep.Iterations) != 1 || rep.Iterations[0].ElectionMs == nil {
				t.Fatalf("report %v: %+v", err, rep)
			}
			waitReadyzOK(t, "readyz through the VIP after the kill-leader drill")
		}},
		{"a reload that fails is rolled back", func(t *testing.T) {
			// Something else holds port 7443 on lb-b: HAProxy's new workers can't bind it, so the master
			// keeps the old ones (systemctl reload still succeeds) and only the port shows it.
			suite.ExecOn(t, "lb-b", "systemd-run", "--unit", "hactl-e2e-squatter", "socat", "TCP-LISTEN:7443,reuseaddr,fork", "EXEC:/bin/true")
			defer suite.ExecOn(t, "lb-b", "systemctl", "stop", "hactl-e2e-squatter")
			before := suite.ExecOn(t, "lb-b", "sha256sum", lb.HAProxyConfigPath)
			c := suite.Spec(t, 3)
			c.Spec.LoadBalancer.FrontendPort = 7443
			r := suite.Hactl(t, "bootstrap", "-f", harness.WriteSpec(t, c, "cluster-7443.yaml"))
			if r.Code != 1 || !strings.Contains(r.Stderr, "lb-b") || !strings.Contains(r.Stderr, "rolled back to the previous configuration") {
				t.Fatalf("exit %d; want 1 with lb-b's rollback:\n%s", r.Code, r.Stderr)
			}
			if after := suite.ExecOn(t, "lb-b", "sha256sum", lb.HAProxyConfigPath); after != before {
				t.Errorf("lb-b haproxy.cfg after the rollback: %s, before: %s", after, before)
			}
			if out := suite.ExecOn(t, "lb-b", "ss", "-Hltnp", "sport = :6443"); !strings.Contains(out, "haproxy") {
				t.Errorf("lb-b: HAProxy no longer serves :6443 after the rollback: %q", out)
			}
			// Back to the spec: lb-a returns to :6443 too.
			res := suite.BootstrapJSON(t, spec)
			if !slices.ContainsFunc(res.Hosts, func(h report.Host) bool { return h.Name == "lb-a" && h.Action == "changed" }) {
				t.Errorf("lb-a not changed back: %+v", res.Hosts)
			}
			waitReadyzOK(t, "readyz through the VIP after the rollback")
		}},
		{"etcd restored from a snapshot under the running control plane: the restarted apiservers serve the snapshot's objects", func(t *testing.T) {
			kubectl := func(args ...string) (string, error) { return suite.Lab.Kubectl(ctx, args...) }
			if out, err := kubectl("create", "configmap", "e2e-before-snapshot", "-n", "default"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			snap := saveSnapshot(t)
			if out, err := kubectl("create", "configmap", "e2e-after-snapshot", "-n", "default"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			// hactl restore holds the control planes while etcd is restored (kubelet stopped, the
			// kubeadm containers killed) and starts kubelet again after, waiting for every
			// kube-apiserver: once it returns, each control plane runs a kube-apiserver started
			// after the restore (its watch cache cannot predate it) that answers /readyz.
			cps := []string{"cp-a", "cp-b", "cp-c"}
			old := map[string]string{}
			for _, h := range cps {
				old[h] = suite.ExecOn(t, h, "pgrep", "-x", "kube-apiserver")
			}
			r := suite.MustHactl(t, "restore", "-f", spec, "--from", snap, "--force", "--yes")
			for _, want := range []string{"[restore/hold]", "kubelet stopped; kube-apiserver", "[restore/release]", "kube-apiserver ready on the restored etcd"} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("restore's output lacks %q:\n%s", want, r.Stderr)
				}
			}
			for _, h := range cps {
				pid, _ := suite.Lab.Exec(ctx, h, "pgrep", "-x", "kube-apiserver")
				if pid == "" || pid == old[h] {
					t.Errorf("%s: kube-apiserver pid %q after the restore (before: %s): want a new one", h, pid, old[h])
				}
				out, err := suite.Lab.Exec(ctx, h, "curl", "--silent", "--show-error", "--insecure", "--max-time", "3", "https://127.0.0.1:6443/readyz")
				if err != nil || strings.TrimSpace(out) != "ok" {
					t.Errorf("%s: /readyz right after the restore: %v %s", h, err, out)
				}
			}
			harness.WaitFor(t, "the snapshot's ConfigMap through the VIP", 3*time.Minute, time.Second, func() string {
				if out, err := kubectl("get", "configmap", "e2e-before-snapshot", "-n", "default"); err != nil {
					return fmt.Sprintf("%v: %s", err, out)
				}
				return ""
			})
			// The VIP balances over three apiservers just restarted: until HAProxy has seen each go
			// and come back, a request may land on one still starting (EOF, connection refused).
			// Those are retried; any answer of an apiserver is the verdict.
			harness.WaitFor(t, "an apiserver's answer for the ConfigMap created after the snapshot", time.Minute, time.Second, func() string {
				out, err := kubectl("get", "configmap", "e2e-after-snapshot", "-n", "default")
				switch {
				case err == nil:
					t.Fatalf("the ConfigMap created after the snapshot survived the restore: %s", out)
				case strings.Contains(out+err.Error(), "NotFound"):
					return ""
				}
				return fmt.Sprintf("%v: %s", err, out)
			})
			harness.WaitFor(t, "kubectl get nodes after the restore", time.Minute, time.Second, func() string {
				if out, err := kubectl("get", "nodes"); err != nil {
					return fmt.Sprintf("%v: %s", err, out)
				}
				return ""
			})
			for _, b := range []string{"cp-a", "cp-b", "cp-c"} {
				waitBackend(t, spec, b, "UP")
			}
		}},
		{"everything converged: a re-run is a no-op; every node Ready", func(t *testing.T) {
			res := suite.BootstrapJSON(t, spec)
			for _, h := range res.Hosts {
				if h.Action != "unchanged" {
					t.Errorf("%s: %s %v", h.Name, h.Action, h.Changes)
				}
			}
			if _, code := lbStatus(t, spec); code != 0 {
				t.Errorf("status exit %d on a healthy cluster", code)
			}
			// The later phases start from this cluster: the workers too are Ready after the restore.
			harness.WaitFor(t, "every node Ready after the restore", 2*time.Minute, 2*time.Second, func() string { return readyNodes(sortedNodes()...) })
		}},
	}
	runSteps(t, steps)
}

// saveSnapshot streams a snapshot of the lab's etcd (hactl's client certificate in the lab's state
// dir) into a temp file and returns its path.
func saveSnapshot(t *testing.T) string {
	t.Helper()
	cli := harness.EtcdClient(t, filepath.Join(suite.Lab.Dir(), "state-3"), suite.Endpoint(t, "cp-a"), suite.Endpoint(t, "cp-b"), suite.Endpoint(t, "cp-c"))
	defer cli.Close()
	return harness.SaveSnapshot(t, cli, "snapshot.db")
}
