//go:build e2e

package kubee2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/lease"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/kubesched"
)

// schedulerArchive is the image `make scheduler-image` built (bin/ next to the hactl under test).
func schedulerArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(suite.Bin), "hactl-scheduler-image.tar")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: make e2e builds it (make scheduler-image)", err)
	}
	return p
}

// schedSpec is the lab's Kubernetes spec with spec.scheduler preferring az-a, written as name.
func schedSpec(t *testing.T, name string, mutate func(s *v1alpha1.Scheduler)) string {
	t.Helper()
	c := labSpec(t)
	// bindAddress 0.0.0.0: the secure port answers from the other hosts, as a Prometheus scraping them needs.
	c.Spec.Scheduler = &v1alpha1.Scheduler{ImageArchive: schedulerArchive(t), BindAddress: "0.0.0.0", PreferredZones: []v1alpha1.PreferredZone{{Zone: "az-a", Weight: 100}}}
	if mutate != nil {
		mutate(c.Spec.Scheduler)
	}
	return harness.WriteSpecIn(t, suite.Lab.Dir(), c, name)
}

type podList struct {
	Items []struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

func pods(t *testing.T, selector string) podList {
	t.Helper()
	var pl podList
	if err := json.Unmarshal([]byte(kubectl(t, "get", "pods", "-n", "default", "-l", selector, "-o", "json")), &pl); err != nil {
		t.Fatal(err)
	}
	return pl
}

// placement counts the bound pods of selector per node ("" when some are still unbound).
func placement(t *testing.T, selector string, want int) (map[string]int, string) {
	pl := pods(t, selector)
	per := map[string]int{}
	for _, p := range pl.Items {
		if p.Spec.NodeName == "" {
			return nil, p.Metadata.Name + " unbound"
		}
		per[p.Spec.NodeName]++
	}
	if len(pl.Items) != want {
		return nil, fmt.Sprintf("%d pods, want %d", len(pl.Items), want)
	}
	return per, ""
}

// workload is replicas pods for hactl-scheduler, each requesting cpu.
func workload(t *testing.T, name string, replicas int, cpu string) {
	t.Helper()
	manifest := filepath.Join(suite.Lab.Dir(), name+".yaml")
	doc := `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: default}
spec:
  replicas: ` + strconv.Itoa(replicas) + `
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      schedulerName: hactl-scheduler
      terminationGracePeriodSeconds: 0
      containers:
      - {name: pause, image: registry.k8s.io/pause:3.10.2, imagePullPolicy: Never, resources: {requests: {cpu: ` + cpu + `, memory: 8Mi}}}
`
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", manifest)
}

// leaseDrill runs kill-leader on hactl-scheduler's Lease by method with args and checks what holds
// whatever the timing: another identity took over, every pod was bound, and RecordingBinder's
// identities bound in disjoint revision windows (two of them at least: the old leader's and the new).
func leaseDrill(t *testing.T, method string, args ...string) lease.Report {
	t.Helper()
	rf := filepath.Join(t.TempDir(), "drill.json")
	all := append([]string{"drill", "kill-leader", "--target", "lease/kube-system/hactl-scheduler", "--method", method, "--yes", "-o", "json", "--report", rf}, args...)
	r := suite.MustHactl(t, all...)
	var rep lease.Report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("%s: %v\n%s", method, err, r.Stdout)
	}
	if raw, err := os.ReadFile(rf); err != nil || !strings.Contains(string(raw), `"result": "pass"`) {
		t.Errorf("%s: --report %s: %v", method, rf, err)
	}
	var table strings.Builder
	rep.Print(&table)
	t.Logf("%s: the report as the table prints it:\n%s", method, table.String())
	if rep.Result != "pass" || len(rep.Iter) != 1 {
		t.Fatalf("%s: result %s (%v)", method, rep.Result, rep.Failures)
	}
	it := rep.Iter[0]
	if it.NewHolder == "" || it.NewHolder == it.OldHolder || it.TakeoverMs == nil || it.FirstBindMs == nil {
		t.Errorf("%s: old %s, new %s, takeover %s, first bind %s", method, it.OldHolder, it.NewHolder, fmtMs(it.TakeoverMs), fmtMs(it.FirstBindMs))
	}
	if it.PodsBound != it.PodsCreated || it.PodsCreated == 0 || len(it.Overlaps) > 0 || len(it.Windows) < 2 || !strings.HasPrefix(it.Proof, "held") {
		t.Errorf("%s: %d/%d pods bound, windows %+v, overlaps %v, proof %q", method, it.PodsBound, it.PodsCreated, it.Windows, it.Overlaps, it.Proof)
	}
	return rep
}

func fmtMs(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 0, 64) + "ms"
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// testScheduler is TestKube's scheduler phase: on the cluster the kubernetes phase built, bad
// scheduler specs are refused before any host is contacted; hactl-scheduler is deployed as static
// pods on the three control planes, one replica holds its Lease, and a re-run changes nothing; its pods land in the preferred zone and
// every pod names the replica that bound it; a worker marked for maintenance receives nothing new,
// and a pod with nowhere to go says which node is under maintenance; bin-packing fills one worker
// before the next; the Lease drill by SIGKILL and SIGTERM proves a clean takeover; the Deployment
// mode through a kubeconfig deploys, reports, survives the drill by pod deletion, and is removed.
func testScheduler(t *testing.T) {
	ctx := context.Background()
	// The cluster may be where the earlier phases left it (or one of them failed): bootstrap converges it.
	suite.BootstrapJSON(t, suite.Lab.SpecPath(3))
	suite.MustHactl(t, "kubeconfig", "-f", suite.Lab.SpecPath(3), "--out", suite.Lab.Kubeconfig())
	spec := schedSpec(t, "cluster-sched.yaml", nil)
	t.Cleanup(func() {
		for _, n := range []string{"w-a", "w-b", "w-c"} {
			suite.HactlQuiet(t, "maintenance", "end", n, "-f", spec)
		}
		suite.Lab.Kubectl(ctx, "delete", "deployment", "-n", "default", "zp", "pack", "--ignore-not-found", "--wait=false")
	})
	steps := []step{
		{"bad scheduler specs are refused with the field path, nothing deployed", func(t *testing.T) {
			w, neg := int32(0), int32(-3)
			for name, tc := range map[string]struct {
				mutate func(s *v1alpha1.Scheduler)
				want   string
			}{
				"profile default-scheduler": {func(s *v1alpha1.Scheduler) { s.SchedulerName = "default-scheduler" }, "spec.scheduler.schedulerName"},
				"lease of kube-scheduler":   {func(s *v1alpha1.Scheduler) { s.LeaderElection.ResourceName = "kube-scheduler" }, "spec.scheduler.leaderElection.resourceName"},
				"timings client-go rejects": {func(s *v1alpha1.Scheduler) {
					s.LeaderElection.RetryPeriod = v1alpha1.Duration{Duration: 9 * time.Second}
				}, "spec.scheduler.leaderElection.renewDeadline"},
				"zone no host has": {func(s *v1alpha1.Scheduler) { s.PreferredZones[0].Zone = "az-q" }, "spec.scheduler.preferredZones[0].zone"},
				"percentage 120":   {func(s *v1alpha1.Scheduler) { p := int32(120); s.PercentageOfNodesToScore = &p }, "spec.scheduler.percentageOfNodesToScore"},
				"replicas > nodes": {func(s *v1alpha1.Scheduler) { s.Replicas = 7 }, "spec.scheduler.replicas"},
				"removed plugin": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"score": {Enabled: []v1alpha1.SchedulerPlugin{{Name: "NodeResourcesMostAllocated"}}}}
				}, "NodeResourcesFit with scoringStrategy MostAllocated"},
				"plugin twice": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"filter": {Enabled: []v1alpha1.SchedulerPlugin{{Name: "NodePorts"}, {Name: "NodePorts"}}}}
				}, "spec.scheduler.plugins[filter].enabled[1].name"},
				"score weight 0": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"score": {Enabled: []v1alpha1.SchedulerPlugin{{Name: "ImageLocality", Weight: &w}}}}
				}, "spec.scheduler.plugins[score].enabled[0].weight"},
				"score weight negative": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"score": {Enabled: []v1alpha1.SchedulerPlugin{{Name: "ImageLocality", Weight: &neg}}}}
				}, "spec.scheduler.plugins[score].enabled[0].weight"},
				"plugin that does not exist": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"filter": {Enabled: []v1alpha1.SchedulerPlugin{{Name: "ZoneGuard"}}}}
				}, "spec.scheduler.plugins[filter].enabled[0].name"},
				"plugin off its extension point": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"score": {Enabled: []v1alpha1.SchedulerPlugin{{Name: "NodePorts"}}}}
				}, "does not implement score"},
				"hactl's guard disabled": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"filter": {Disabled: []v1alpha1.SchedulerPlugin{{Name: "MaintenanceGuard"}}}}
				}, "spec.scheduler.plugins[filter].disabled[0].name"},
				"no queueSort plugin": {func(s *v1alpha1.Scheduler) {
					s.Plugins = map[string]v1alpha1.PluginSet{"queueSort": {Disabled: []v1alpha1.SchedulerPlugin{{Name: "PrioritySort"}}}}
				}, "spec.scheduler.plugins[queueSort]"},
				"privileged port":      {func(s *v1alpha1.Scheduler) { s.SecurePort = 443 }, "spec.scheduler.securePort"},
				"image with a scheme":  {func(s *v1alpha1.Scheduler) { s.Image = "https://ghcr.io/hactl/s:1" }, "spec.scheduler.image"},
				"a host's bindAddress": {func(s *v1alpha1.Scheduler) { s.BindAddress = "10.0.0.11" }, "spec.scheduler.bindAddress"},
				"timings kube-scheduler would die on": {func(s *v1alpha1.Scheduler) {
					s.LeaderElection.LeaseDuration = v1alpha1.Duration{Duration: 10 * time.Second}
				}, "spec.scheduler.leaderElection.leaseDuration"},
			} {
				r := suite.Hactl(t, "scheduler", "deploy", "-f", schedSpec(t, "bad-sched.yaml", tc.mutate))
				if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
					t.Errorf("%s: exit %d, want 2 naming %s:\n%s", name, r.Code, tc.want, r.Stderr)
				}
			}
			if r := suite.Hactl(t, "maintenance", "start", "w-z", "-f", spec); r.Code != 2 || !strings.Contains(r.Stderr, `"w-z" is not a Kubernetes node`) {
				t.Errorf("maintenance start w-z: exit %d, want 2:\n%s", r.Code, r.Stderr)
			}
			if suite.Exists(t, "cp-a", kubesched.ManifestFile) {
				t.Errorf("cp-a has %s after refused deploys", kubesched.ManifestFile)
			}
		}},
		{"deploy: a static pod on every control plane, one Lease holder; a re-run changes nothing", func(t *testing.T) {
			start := time.Now()
			r := schedulerDeploy(t, "-f", spec)
			t.Logf("first deploy took %s:\n%s", time.Since(start).Round(100*time.Millisecond), r.Stderr)
			for _, h := range []string{"cp-a", "cp-b", "cp-c"} {
				if !strings.Contains(r.Stderr, h) || !strings.Contains(r.Stderr, "static pod") {
					t.Errorf("deploy output lacks %s's static pod:\n%s", h, r.Stderr)
				}
			}
			harness.WaitFor(t, "3 scheduler replicas Ready, one leader", 2*time.Minute, 2*time.Second, func() string {
				var st kubesched.Status
				r := suite.HactlQuiet(t, "scheduler", "status", "-f", spec, "-o", "json")
				if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
					return err.Error() + ": " + r.Stderr
				}
				ready, leaders := 0, 0
				for _, rep := range st.Replicas {
					if rep.Ready {
						ready++
					}
					if rep.Leader {
						leaders++
					}
				}
				if ready != 3 || leaders != 1 || st.Lease.Holder == "" {
					return r.Stdout
				}
				return ""
			})
			for _, h := range labSpec(t).Spec.Hosts {
				if h.Name == "cp-a" {
					url := fmt.Sprintf("https://%s:%d/livez", h.Address, v1alpha1.DefaultSchedulerSecurePort)
					if out := suite.ExecOn(t, "cp-b", "curl", "-ksS", "--max-time", "5", url); out != "ok" {
						t.Errorf("cp-b: curl %s: %q, want ok (bindAddress 0.0.0.0)", url, out)
					}
				}
			}
			pids := map[string]string{}
			for _, h := range []string{"cp-a", "cp-b", "cp-c"} {
				pids[h] = suite.ExecOn(t, h, "sh", "-c", "pgrep -f 'hactl-scheduler --config' | head -1")
			}
			r = schedulerDeploy(t, "-f", spec)
			if n := strings.Count(r.Stderr, "scheduler/install: unchanged"); n != 3 {
				t.Errorf("re-run: %d hosts unchanged, want 3:\n%s", n, r.Stderr)
			}
			for h, pid := range pids {
				if now := suite.ExecOn(t, h, "sh", "-c", "pgrep -f 'hactl-scheduler --config' | head -1"); now != pid {
					t.Errorf("%s: the scheduler restarted on a re-run (pid %s → %s)", h, pid, now)
				}
			}
		}},
		{"its pods land in the preferred zone, each naming the replica that bound it", func(t *testing.T) {
			workload(t, "zp", 6, "10m")
			var per map[string]int
			harness.WaitFor(t, "6 pods bound", time.Minute, time.Second, func() (why string) { per, why = placement(t, "app=zp", 6); return })
			if per["w-a"] != 6 {
				t.Errorf("placement %v, want all 6 on w-a (az-a, the preferred zone)", per)
			}
			for _, p := range pods(t, "app=zp").Items {
				if by := p.Metadata.Annotations[kubesched.BoundByAnnotation]; !strings.HasPrefix(by, "cp-") {
					t.Errorf("%s: %s = %q, want the binding replica's identity (cp-X_…)", p.Metadata.Name, kubesched.BoundByAnnotation, by)
				}
			}
		}},
		{"a worker under maintenance receives nothing new; with nowhere to go, the reason names it", func(t *testing.T) {
			suite.MustHactl(t, "maintenance", "start", "w-a", "-f", spec, "--reason", "e2e")
			kubectl(t, "scale", "deployment/zp", "--replicas", "9")
			var per map[string]int
			harness.WaitFor(t, "9 pods bound", time.Minute, time.Second, func() (why string) { per, why = placement(t, "app=zp", 9); return })
			if per["w-a"] != 6 {
				t.Errorf("placement %v: w-a under maintenance got new pods (want its 6, the 3 new elsewhere)", per)
			}
			for _, n := range []string{"w-b", "w-c"} {
				suite.MustHactl(t, "maintenance", "start", n, "-f", spec)
			}
			kubectl(t, "scale", "deployment/zp", "--replicas", "10")
			harness.WaitFor(t, "the 10th pod unschedulable, naming the nodes under maintenance", time.Minute, time.Second, func() string {
				for _, p := range pods(t, "app=zp").Items {
					for _, c := range p.Status.Conditions {
						if c.Type == "PodScheduled" && c.Reason == "Unschedulable" {
							for _, n := range []string{"w-a", "w-b", "w-c"} {
								if !strings.Contains(c.Message, "node "+n+" is under maintenance") {
									return "reason: " + c.Message
								}
							}
							return ""
						}
					}
				}
				return "no unschedulable pod yet"
			})
			for _, n := range []string{"w-a", "w-b", "w-c"} {
				suite.MustHactl(t, "maintenance", "end", n, "-f", spec)
			}
			harness.WaitFor(t, "the 10th pod bound once the mark is cleared", time.Minute, time.Second, func() (why string) { _, why = placement(t, "app=zp", 10); return })
			kubectl(t, "delete", "deployment", "zp", "--wait=true", "--timeout", "60s")
		}},
		{"bin-packing fills one worker before the next", func(t *testing.T) {
			// Without a zone preference, MostAllocated scores the fuller worker higher: 4 pods of
			// 300m fill one 2-CPU worker's allocatable (kubelet reserves none here) before another.
			schedulerDeploy(t, "-f", schedSpec(t, "cluster-pack.yaml", func(s *v1alpha1.Scheduler) { s.PreferredZones = nil }))
			workload(t, "pack", 4, "300m")
			var per map[string]int
			harness.WaitFor(t, "4 pods bound", 2*time.Minute, time.Second, func() (why string) { per, why = placement(t, "app=pack", 4); return })
			var counts []int
			for n, c := range per {
				if !strings.HasPrefix(n, "w-") {
					t.Errorf("a pod on %s", n)
				}
				counts = append(counts, c)
			}
			slices.Sort(counts)
			if counts[len(counts)-1] < 3 {
				t.Errorf("placement %v: not packed (stock spreading puts one or two per worker)", per)
			}
			kubectl(t, "delete", "deployment", "pack", "--wait=false")
		}},
		{"lease drill over SSH: SIGKILL and SIGTERM of the holder's container, another replica takes over, no two leaders", func(t *testing.T) {
			for _, method := range []string{"process", "graceful"} {
				rep := leaseDrill(t, method, "-f", spec)
				it := rep.Iter[0]
				if !strings.HasPrefix(it.Killed, "container hactl-scheduler on cp-") || lease.HostOf(it.NewHolder) == "" {
					t.Errorf("%s: killed %q, new holder %q", method, it.Killed, it.NewHolder)
				}
				t.Logf("%s: takeover %s, first bind %s, longest gap %s, pending peak %d, %d pods", method,
					fmtMs(it.TakeoverMs), fmtMs(it.FirstBindMs), fmtMs(it.LongestGapMs), it.PendingPeak, it.PodsBound)
			}
			badKubeconfig := filepath.Join(t.TempDir(), "bad.conf")
			if err := os.WriteFile(badKubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			target := []string{"drill", "kill-leader", "-f", spec, "--target", "lease/kube-system/hactl-scheduler", "--yes"}
			for _, tc := range []struct {
				args []string
				want string
			}{
				{[]string{"drill", "kill-leader", "-f", spec, "--target", "lease/kube-system", "--yes"}, "lease/NAMESPACE/NAME"},
				{append(target, "--method", "network"), "--method network"},
				{[]string{"drill", "kill-leader", "-f", spec, "--target", "lease/Kube_System/hactl-scheduler", "--yes"}, "namespace"},
				{append(target, "--max-rto", "-5s"), "--max-rto"},
				{append(target, "--pod-rate", "0"), "--pod-rate 0"},
				{append(target, "--pod-image", "https://registry.k8s.io/pause"), "--pod-image"},
				{[]string{"drill", "kill-leader", "-f", spec, "--pod-rate", "3", "--yes"}, "--pod-rate is for --target"},
				{append(target, "--kubeconfig", badKubeconfig), "--kubeconfig"},
				{[]string{"scheduler", "status", "--kubeconfig", badKubeconfig}, "--kubeconfig"},
				{[]string{"scheduler", "remove", "--kubeconfig", badKubeconfig, "--yes"}, "--kubeconfig"},
				{[]string{"scheduler", "deploy", "--kubeconfig", badKubeconfig, "--dry-run"}, "--kubeconfig"},
			} {
				if r := suite.Hactl(t, tc.args...); r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
					t.Errorf("hactl %s: exit %d, want 2 naming %s:\n%s", strings.Join(tc.args, " "), r.Code, tc.want, r.Stderr)
				}
			}
		}},
		{"Deployment mode through a kubeconfig: deploy, status, the lease drill by pod deletion, remove", func(t *testing.T) {
			suite.MustHactl(t, "scheduler", "remove", "-f", spec, "--yes")
			afterStaticSchedulerRemove(t, spec)
			// The nodes get the image as `kind load image-archive` gives it to a kind cluster's,
			// all six at once (as kind does).
			archive := schedulerArchive(t)
			nodeNames := sortedNodes()
			importErrs := make([]error, len(nodeNames))
			var wg sync.WaitGroup
			for i, n := range nodeNames {
				h, err := suite.Lab.Host(n)
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					f, err := os.Open(archive)
					if err != nil {
						importErrs[i] = err
						return
					}
					defer f.Close()
					cmd := exec.CommandContext(ctx, "docker", "exec", "-i", h.Container, "ctr", "-n", "k8s.io", "images", "import", "-")
					cmd.Stdin = f
					if out, err := cmd.CombinedOutput(); err != nil {
						importErrs[i] = fmt.Errorf("%s: ctr import: %w\n%s", n, err, out)
					}
				}()
			}
			wg.Wait()
			for _, err := range importErrs {
				if err != nil {
					t.Error(err)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			kc := suite.Lab.Kubeconfig()
			// Without a spec file: the defaults and the flags; checked against the cluster's nodes.
			noSpec := filepath.Join(t.TempDir(), "absent.yaml")
			for _, bad := range [][]string{{"--preferred-zone", "az-q=100"}, {"--replicas", "7"}, {"--preferred-zone", "az-a=0"}} {
				args := append([]string{"scheduler", "deploy", "--kubeconfig", kc, "--image-archive", schedulerArchive(t)}, bad...)
				r := suite.Command(t, args...)
				r.Dir = filepath.Dir(noSpec)
				out, err := r.CombinedOutput()
				if code := exitCode(err); code != 2 {
					t.Errorf("%v: exit %d, want 2:\n%s", bad, code, out)
				}
			}
			if out := kubectl(t, "get", "deployment", "-n", "kube-system", "--ignore-not-found", "-o", "name"); strings.Contains(out, "hactl-scheduler") {
				t.Fatalf("a refused deploy created the Deployment: %s", out)
			}
			r := schedulerDeploy(t, "-f", spec, "--kubeconfig", kc)
			t.Logf("%s", r.Stderr)
			var st kubesched.Status
			if err := json.Unmarshal([]byte(suite.MustHactl(t, "scheduler", "status", "-f", spec, "--kubeconfig", kc, "-o", "json").Stdout), &st); err != nil {
				t.Fatal(err)
			}
			nodes, leaders := map[string]bool{}, 0
			for _, rep := range st.Replicas {
				nodes[rep.Node] = true
				if rep.Leader {
					leaders++
				}
			}
			if len(st.Replicas) != 3 || len(nodes) != 3 || leaders != 1 {
				t.Errorf("status %+v: want 3 replicas on 3 nodes, one leader", st)
			}
			for _, method := range []string{"process", "graceful"} {
				rep := leaseDrill(t, method, "-f", spec, "--kubeconfig", kc)
				it := rep.Iter[0]
				if !strings.HasPrefix(it.Killed, "pod kube-system/hactl-scheduler-") {
					t.Errorf("%s: killed %q, want the holder's pod", method, it.Killed)
				}
				t.Logf("%s: takeover %s, first bind %s, longest gap %s, pending peak %d, %d pods", method,
					fmtMs(it.TakeoverMs), fmtMs(it.FirstBindMs), fmtMs(it.LongestGapMs), it.PendingPeak, it.PodsBound)
			}
			suite.MustHactl(t, "scheduler", "remove", "-f", spec, "--kubeconfig", kc, "--yes")
			if out := kubectl(t, "get", "deployment,configmap,serviceaccount,pdb", "-n", "kube-system", "-l", kubesched.Selector, "-o", "name"); strings.TrimSpace(out) != "" {
				t.Errorf("left after remove: %s", out)
			}
			afterSchedulerRemoveThroughAPI(t, spec, kc)
		}},
	}
	runSteps(t, steps)
}

// schedulerDeploy runs `hactl scheduler deploy args...` and fails the test (t.Fatalf) unless it exits
// 0; a failed deploy first logs what kubelet did with the scheduler's pods: the pods, their
// description, and each control plane's containers and kubelet journal lines about them.
func schedulerDeploy(t *testing.T, args ...string) harness.Result {
	t.Helper()
	r := suite.Hactl(t, append([]string{"scheduler", "deploy"}, args...)...)
	if r.Code == 0 {
		return r
	}
	ctx := context.Background()
	var diag strings.Builder
	for _, a := range [][]string{
		{"get", "pods", "-n", "kube-system", "-o", "wide"},
		{"describe", "pods", "-n", "kube-system", "-l", kubesched.Selector},
		{"get", "events", "-n", "kube-system", "--sort-by", ".lastTimestamp"},
	} {
		o, err := suite.Lab.Kubectl(ctx, a...)
		fmt.Fprintf(&diag, "\n$ kubectl %s (err %v)\n%s", strings.Join(a, " "), err, o)
	}
	for _, h := range []string{"cp-a", "cp-b", "cp-c"} {
		cmd := "crictl ps -a --name hactl-scheduler; journalctl -u kubelet --since -6min --no-pager | grep -i -E 'hactl-scheduler|static pod' | tail -60"
		o, err := suite.Lab.Exec(ctx, h, "sh", "-c", cmd)
		fmt.Fprintf(&diag, "\n$ %s: %s (err %v)\n%s", h, cmd, err, o)
	}
	t.Fatalf("hactl scheduler deploy %s: exit %d, want 0\n%s", strings.Join(args, " "), r.Code, diag.String())
	return r
}
