//go:build e2e

package kinde2e

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/drill/lease"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/e2e/workflow"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/status"
)

// hactlObject matches the names of what hactl deploys (kubectl's TYPE/NAME): hactl-scheduler's and
// hactl-operator's objects and the hactl.io CRDs, not the lab's own (hactl-lab-*).
var hactlObject = regexp.MustCompile(`/(hactl-scheduler|hactl-operator|system:hactl-scheduler)|\.hactl\.io$`)

// cluster is the kind cluster the workflow creates here: the hactl-lab prefix, so the lab's
// teardown removes its nodes whatever happens to the test.
const cluster = "hactl-lab-ci"

// The object store key's variables, as the workflow's job env names them (the user's spec names
// the same ones in spec.backup).
const (
	accessKeyEnv    = "HACTL_S3_ACCESS_KEY_ID"
	secretKeyEnv    = "HACTL_S3_SECRET_ACCESS_KEY"
	sessionTokenEnv = "HACTL_S3_SESSION_TOKEN"
)

// ci is the state the subtests of TestWorkflowOnKind share.
type ci struct {
	// hactl runs bin/hactl as the workflow's steps run theirs: the object store key in the
	// variables the spec names, kind (as the workflow installed it) and the lab's docker wrapper
	// first on PATH.
	hactl      *harness.Suite
	runner     *workflow.Runner
	job        *workflow.Job
	spec       string // the etcd cluster's cluster.yaml (vars.HACTL_SPEC)
	name       string // its metadata.name
	kubeconfig string // the kind cluster's, as the workflow's cluster step wrote it
	reports    string // <workspace>/$REPORTS
}

// TestWorkflowOnKind runs examples/github-actions.yaml's run steps, unchanged, with this machine's
// values where the workflow reads them from the environment: hactl installed by `go install
// github.com/hactl/hactl/cmd/hactl@VERSION` from a module proxy serving this checkout; kind by `go
// install sigs.k8s.io/kind@v0.33.0`; the kind cluster created from the lab's node image and config
// (KIND_NODE_IMAGE, KIND_CONFIG) with the lab's docker wrapper first on PATH; the image archives
// make built (HACTL_IMAGES); vars.HACTL_SPEC the etcd cluster hactl built on the lab's hosts, and
// the secrets the lab object store's key. Between the steps it checks what the workflow alone
// cannot: bad image archives refused, placement by zone preference and bin-packing, the operator's
// snapshots of the lab's etcd in the lab's MinIO, a drill over budget failing the job with exit 3,
// and everything removed at the end.
func TestWorkflowOnKind(t *testing.T) {
	ctx := context.Background()
	s := &ci{}
	start := time.Now()

	if !t.Run("the etcd cluster the operator watches, built by hactl on the lab's hosts", func(t *testing.T) {
		c := suite.Spec(t, 3)
		c.Spec.Kubernetes, c.Spec.Scheduler = nil, nil
		lab.WithoutLoadBalancer(c)
		lab.WithBackup(c)
		c.Spec.Backup.ObjectStore.Credentials.Env = &v1alpha1.CredentialsEnv{AccessKeyID: accessKeyEnv, SecretAccessKey: secretKeyEnv, SessionToken: sessionTokenEnv}
		s.name = c.Metadata.Name
		s.spec = harness.WriteSpecIn(t, suite.Lab.Dir(), c, "cluster-ci.yaml")
		suite.BootstrapJSON(t, s.spec)
	}) {
		return
	}

	if !t.Run("the workflow's setup: hactl and kind installed with go install, the kind cluster created", func(t *testing.T) {
		s.runner, s.job = newRunner(t, ctx, s.spec)
		store, err := suite.Lab.ObjectStore()
		if err != nil {
			t.Fatal(err)
		}
		s.hactl = suite.WithEnv("PATH="+filepath.Join(s.runner.Temp, "bin")+string(os.PathListSeparator)+filepath.Join(suite.RepoRoot, "hack", "kind")+string(os.PathListSeparator)+os.Getenv("PATH")).
			WithSecretEnv(accessKeyEnv+"="+store.AccessKeyID, secretKeyEnv+"="+store.SecretAccessKey, sessionTokenEnv+"="+store.SessionToken)
		runSteps(t, s.runner, s.job, "", "cluster")
		s.kubeconfig = envOf(t, s.runner, "KUBECONFIG")
		s.reports = filepath.Join(s.runner.Workspace, s.runner.Workflow.Env["REPORTS"])
		nodes := kubectl(t, s.kubeconfig, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.topology\.kubernetes\.io/zone}{"\n"}{end}`)
		for _, want := range []string{cluster + "-worker=az-a", cluster + "-worker2=az-b", cluster + "-worker3=az-c", cluster + "-control-plane="} {
			if !strings.Contains(nodes, want+"\n") {
				t.Errorf("nodes and zones %q lack %s", nodes, want)
			}
		}
	}) {
		return
	}

	t.Run("an image for another architecture is refused before kind load, naming the nodes; so is another cluster's kind name", func(t *testing.T) {
		foreign := foreignArchive(t)
		for _, args := range [][]string{
			{"scheduler", "deploy", "--kubeconfig", s.kubeconfig, "--image-archive", foreign, "--kind-cluster", cluster, "--replicas", "3"},
			{"operator", "deploy", "-f", s.spec, "--kubeconfig", s.kubeconfig, "--image-archive", foreign, "--kind-cluster", cluster},
			{"operator", "deploy", "-f", s.spec, "--kubeconfig", s.kubeconfig, "--image-archive", foreign},
		} {
			r := s.hactl.Hactl(t, args...)
			if r.Code != 2 || !strings.Contains(r.Stderr, "linux/arm64") || !strings.Contains(r.Stderr, cluster+"-worker (linux/amd64)") {
				t.Errorf("%v: exit %d, want 2 naming the archive's platform and the nodes:\n%s", args[:2], r.Code, r.Stderr)
			}
		}
		r := s.hactl.Hactl(t, "scheduler", "deploy", "--kubeconfig", s.kubeconfig, "--image-archive", filepath.Join(suite.RepoRoot, "bin", "hactl-scheduler-image.tar"), "--kind-cluster", "hactl-lab-other")
		if r.Code != 2 || !strings.Contains(r.Stderr, `--kind-cluster hactl-lab-other: kind has no cluster of that name`) {
			t.Errorf("--kind-cluster of no cluster: exit %d, want 2:\n%s", r.Code, r.Stderr)
		}
		if out := kubectl(t, s.kubeconfig, "get", "deployments", "-A", "-o", "name"); strings.Contains(out, "hactl-") {
			t.Errorf("a refused deploy created %s", out)
		}
		for _, n := range []string{cluster + "-control-plane", cluster + "-worker"} {
			out, err := exec.Command("docker", "exec", n, "ctr", "-n", "k8s.io", "images", "ls", "-q").CombinedOutput()
			if err != nil {
				t.Fatalf("%s: ctr images ls: %v\n%s", n, err, out)
			}
			if strings.Contains(string(out), "hactl/foreign") || strings.Contains(string(out), "hactl-scheduler") {
				t.Errorf("%s has images a refused deploy would have loaded:\n%s", n, out)
			}
		}
	})

	if !t.Run("the workflow deploys hactl-scheduler and hactl-operator and runs their Lease drills within MAX_RTO", func(t *testing.T) {
		runSteps(t, s.runner, s.job, "scheduler", "drills")
		for _, l := range []string{"hactl-scheduler", "hactl-operator"} {
			var rep lease.Report
			if err := harness.ReadJSON(filepath.Join(s.reports, l+"-lease-drill.json"), &rep); err != nil {
				t.Fatalf("the drills step's report: %v", err)
			}
			if rep.Result != "pass" || len(rep.Iter) != 1 || rep.Iter[0].TakeoverMs == nil || rep.MaxRTOMs != 30000 {
				t.Errorf("%s: result %s, max RTO %.0f ms, iterations %+v, failures %v", l, rep.Result, rep.MaxRTOMs, rep.Iter, rep.Failures)
				continue
			}
			it := rep.Iter[0]
			t.Logf("%s Lease drill in kind: takeover %.0f ms (killed %s, %s → %s)", l, *it.TakeoverMs, it.Killed, it.OldHolder, it.NewHolder)
		}
	}) {
		return
	}

	t.Run("a drill over budget fails the step with exit 3 and an error annotation; its report is kept", func(t *testing.T) {
		_, step, err := s.job.Step("drills")
		if err != nil {
			t.Fatal(err)
		}
		s.runner.Output = testWriter{t}
		res, err := s.runner.Try(ctx, step, map[string]string{"MAX_RTO": "1ms", "HACTL_SPEC": "", "REPORTS": "over-budget"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != 3 || !strings.Contains(res.Output, "::error title=Lease drill kube-system/hactl-scheduler::a check failed (a takeover over --max-rto 1ms") {
			t.Fatalf("exit %d, want 3 with the annotation:\n%s", res.Code, res.Output)
		}
		var rep lease.Report
		if err := harness.ReadJSON(filepath.Join(s.runner.Workspace, "over-budget", "hactl-scheduler-lease-drill.json"), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Result != "fail" || len(rep.Failures) == 0 {
			t.Errorf("report: result %s, failures %v", rep.Result, rep.Failures)
		}
		t.Logf("over budget: %v", rep.Failures)
	})

	t.Run("hactl-scheduler in kind places pods by zone preference, then packs the rest onto one node", func(t *testing.T) {
		placement(t, s.kubeconfig)
	})

	t.Run("the operator in kind snapshots the lab's etcd into the lab's MinIO; the status step records it", func(t *testing.T) {
		var ec hactlv1.EtcdCluster
		harness.WaitFor(t, "a snapshot taken by the operator", 3*time.Minute, 2*time.Second, func() string {
			out := kubectl(t, s.kubeconfig, "get", "etcdcluster", "-n", deploy.DefaultNamespace, s.name, "-o", "json")
			ec = hactlv1.EtcdCluster{}
			if err := json.Unmarshal([]byte(out), &ec); err != nil {
				return err.Error()
			}
			if ls := ec.Status.LastSnapshot; ls == nil || ls.TakenBy != backup.TakenByOperator {
				return fmt.Sprintf("phase %s, last snapshot %+v", ec.Status.Phase, ls)
			}
			return ""
		})
		if ec.Status.Phase != hactlv1.PhaseRunning {
			t.Errorf("EtcdCluster phase %s, conditions %+v", ec.Status.Phase, ec.Status.Conditions)
		}
		runSteps(t, s.runner, s.job, "status", "status")
		var l backup.Listing
		if err := harness.ReadJSON(filepath.Join(s.reports, "snapshots.json"), &l); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(l.Snapshots, func(sn backup.Snapshot) bool {
			return sn.Stem == ec.Status.LastSnapshot.Name || sn.Metadata.TakenBy == backup.TakenByOperator
		})
		if i < 0 {
			t.Fatalf("snapshots.json lacks the operator's snapshot %s: %+v", ec.Status.LastSnapshot.Name, l.Snapshots)
		}
		t.Logf("the operator's snapshot in MinIO: %s (revision %d, %d bytes)", l.Snapshots[i].Stem, l.Snapshots[i].Revision, l.Snapshots[i].Data.Size)
		var rep status.Report
		if err := harness.ReadJSON(filepath.Join(s.reports, "status.json"), &rep); err != nil {
			t.Fatal(err)
		}
		if o := rep.Operator; o == nil || o.Phase != hactlv1.PhaseRunning || o.Holder == "" {
			t.Errorf("status.json: operator %+v (hactl status reads it where operator deploy recorded the kubeconfig)", rep.Operator)
		}
		s.hactl.MustHactl(t, "backup", "verify", "-f", s.spec, l.Snapshots[i].Stem)
	})

	t.Run("everything removed: operator (with its snapshots), scheduler, then the workflow's cleanup deletes the cluster", func(t *testing.T) {
		s.hactl.MustHactl(t, "operator", "remove", "-f", s.spec, "--kubeconfig", s.kubeconfig, "--purge", "--yes")
		s.hactl.MustHactl(t, "scheduler", "remove", "--kubeconfig", s.kubeconfig, "--yes")
		for _, what := range [][]string{
			{"get", "deployments,leases", "-A", "-o", "name"},
			{"get", "crd", "-o", "name"},
			{"get", "clusterroles,clusterrolebindings", "-o", "name"},
			{"get", "roles,rolebindings,serviceaccounts,configmaps,secrets,poddisruptionbudgets", "-A", "-o", "name"},
		} {
			for _, obj := range strings.Fields(kubectl(t, s.kubeconfig, what...)) {
				if hactlObject.MatchString(obj) {
					t.Errorf("left after remove: %s", obj)
				}
			}
		}
		var rep status.Report
		r := s.hactl.Hactl(t, "status", "-f", s.spec, "-o", "json")
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("status: %v\n%s", err, r)
		}
		if rep.Operator != nil {
			t.Errorf("status after remove still shows an operator: %+v", rep.Operator)
		}
		// What a user does next: both removals run again finish, and the operator's namespace is
		// deleted (kubectl waits until it is gone; an object with a finalizer only the operator
		// clears would keep it Terminating).
		s.hactl.MustHactl(t, "operator", "remove", "-f", s.spec, "--kubeconfig", s.kubeconfig, "--purge", "--yes")
		s.hactl.MustHactl(t, "scheduler", "remove", "--kubeconfig", s.kubeconfig, "--yes")
		kubectl(t, s.kubeconfig, "delete", "namespace", deploy.DefaultNamespace, "--ignore-not-found", "--timeout", "2m")
		rest := s.job.Steps[stepIndex(t, s.job, "status")+1:]
		s.runner.Output = testWriter{t}
		res, err := s.runner.Run(ctx, rest)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Ran && r.Code != 0 {
				t.Errorf("step %q: exit %d", r.Step.Title(), r.Code)
			}
		}
		if !res[len(res)-1].Ran {
			t.Error("the cleanup step did not run")
		}
		if out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "name=^"+cluster+"-", "--format", "{{.Names}}").Output(); err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("kind's nodes left after the cleanup step (docker ps: %v): %s", err, out)
		}
	})
	t.Logf("the whole workflow and its checks: %s", time.Since(start).Round(time.Second))
}

// newRunner loads the example workflow and sets it up for this machine (the package doc of
// TestWorkflowOnKind says which value replaces which).
func newRunner(t *testing.T, ctx context.Context, spec string) (*workflow.Runner, *workflow.Job) {
	t.Helper()
	root := suite.RepoRoot
	w, err := workflow.Load(filepath.Join(root, "examples", "github-actions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job, err := w.Job("drills")
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := lab.WriteModuleProxy(ctx, root, filepath.Join(suite.Lab.Dir(), "goproxy"))
	if err != nil {
		t.Fatal(err)
	}
	goproxy, err := exec.CommandContext(ctx, "go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	in, err := lab.KindInputsFor(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	opts := lab.Options{Logf: t.Logf}
	ref, err := lab.EnsureKindNodeImage(ctx, opts, in)
	if err != nil {
		t.Fatal(err)
	}
	config, err := lab.WriteKindConfig(ctx, opts, in, suite.Lab.Dir())
	if err != nil {
		t.Fatal(err)
	}
	// The runner image's tools that are not in this machine's PATH: kubectl.
	// The workspace and RUNNER_TEMP outlive the subtest that sets the runner up.
	tools, temp, workspace := filepath.Join(suite.Lab.Dir(), "ci-tools"), filepath.Join(suite.Lab.Dir(), "runner-temp"), filepath.Join(suite.Lab.Dir(), "ci-workspace")
	for _, d := range []string{tools, temp, workspace} {
		if err := os.RemoveAll(d); err != nil { // an earlier run's reports must not pass for this one's
			t.Fatal(err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "bin", "kubectl"), filepath.Join(tools, "kubectl")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "KUBECONFIG=") })
	for _, kv := range lab.KindEnviron(root) {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + p + string(os.PathListSeparator) + tools
		}
		base = append(base, kv)
	}
	base = append(base, proxy.Environ(strings.TrimSpace(string(goproxy)))...)
	store, err := suite.Lab.ObjectStore()
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"vars.HACTL_SPEC":            spec,
		"secrets." + accessKeyEnv:    store.AccessKeyID,
		"secrets." + secretKeyEnv:    store.SecretAccessKey,
		"secrets." + sessionTokenEnv: store.SessionToken,
	}
	t.Logf("hactl %s from a module proxy of this checkout; kind node image %s", proxy.Version, ref)
	return &workflow.Runner{
		Workflow: w, Job: job, Workspace: workspace, Temp: temp,
		Base: base,
		Set: map[string]string{
			"HACTL_REF":       proxy.Version,
			"KIND_CLUSTER":    cluster,
			"KIND_NODE_IMAGE": ref,
			"KIND_CONFIG":     config,
			"HACTL_IMAGES":    filepath.Join(root, "bin"),
			"BACKUP_EVERY":    "1m",
		},
		Resolve: func(expr string) (string, error) {
			v, ok := secrets[expr]
			if !ok {
				return "", fmt.Errorf("the e2e has no value for %s", expr)
			}
			return v, nil
		},
	}, job
}

// testWriter logs a step's output into the test log, a line at a time.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// stepIndex is the index of the job's step with id.
func stepIndex(t *testing.T, job *workflow.Job, id string) int {
	t.Helper()
	i, _, err := job.Step(id)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// runSteps runs the job's steps from the one with id from ("" : the first) through the one with id
// to, and fails the test at the first that fails.
func runSteps(t *testing.T, r *workflow.Runner, job *workflow.Job, from, to string) {
	t.Helper()
	r.Output = testWriter{t}
	first := 0
	if from != "" {
		first = stepIndex(t, job, from)
	}
	res, err := r.Run(context.Background(), job.Steps[first:stepIndex(t, job, to)+1])
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if x.Ran {
			t.Logf("step %q: exit %d in %s", x.Step.Title(), x.Code, x.Duration.Round(100*time.Millisecond))
		}
		if x.Ran && x.Code != 0 {
			t.Fatalf("step %q failed: exit %d (%v)", x.Step.Title(), x.Code, x.Err)
		}
	}
}

// envOf is what the runner's steps see as name (after GITHUB_ENV).
func envOf(t *testing.T, r *workflow.Runner, name string) string {
	t.Helper()
	r.Output = nil
	res, err := r.Try(context.Background(), workflow.Step{Run: `printf %s "$` + name + `"`}, nil)
	if err != nil || res.Code != 0 || res.Output == "" {
		t.Fatalf("%s in the steps' environment: %q (%v)", name, res.Output, err)
	}
	return res.Output
}

func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(suite.RepoRoot, "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// foreignArchive writes a docker save archive of one image for linux/arm64 only (a manifest and an
// image config, no layers): what deploy reads to name the image and its platform.
func foreignArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "arm64.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range []struct{ name, body string }{
		{"manifest.json", `[{"Config":"config.json","RepoTags":["ghcr.io/hactl/foreign:arm64"],"Layers":[]}]`},
		{"config.json", `{"architecture":"arm64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// placement: with the workflow's --preferred-zone az-a=100, pods requesting a quarter of a
// worker's allocatable CPU each fill the az-a worker first; the rest go to one other node, not
// spread over both (MostAllocated, bin-packing).
func placement(t *testing.T, kubeconfig string) {
	t.Helper()
	alloc := kubectl(t, kubeconfig, "get", "node", cluster+"-worker", "-o", "jsonpath={.status.allocatable.cpu}")
	milli, err := cpuMilli(alloc)
	if err != nil {
		t.Fatal(err)
	}
	const replicas = 5
	req := milli / 4
	manifest := filepath.Join(t.TempDir(), "zp.yaml")
	pause := (&v1alpha1.Kubernetes{Version: lab.KubernetesVersion}).PauseImage()
	doc := `apiVersion: apps/v1
kind: Deployment
metadata: {name: zp, namespace: default}
spec:
  replicas: ` + strconv.Itoa(replicas) + `
  selector: {matchLabels: {app: zp}}
  template:
    metadata: {labels: {app: zp}}
    spec:
      schedulerName: hactl-scheduler
      terminationGracePeriodSeconds: 0
      containers:
      - {name: pause, image: "` + pause + `", imagePullPolicy: IfNotPresent, resources: {requests: {cpu: ` + strconv.Itoa(req) + `m, memory: 8Mi}}}
`
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, kubeconfig, "apply", "-f", manifest)
	defer kubectl(t, kubeconfig, "delete", "-f", manifest, "--wait=false")
	per := map[string]int{}
	harness.WaitFor(t, "every pod bound", 2*time.Minute, time.Second, func() string {
		out := kubectl(t, kubeconfig, "get", "pods", "-l", "app=zp", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}`)
		clear(per)
		n := 0
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			name, node, _ := strings.Cut(line, " ")
			if node == "" {
				return name + " unbound"
			}
			per[node]++
			n++
		}
		if n != replicas {
			return fmt.Sprintf("%d pods", n)
		}
		return ""
	})
	t.Logf("%d pods of %dm CPU (the az-a worker has %s allocatable): %v", replicas, req, alloc, per)
	a := per[cluster+"-worker"]
	for node, n := range per {
		if n > a {
			t.Errorf("%s holds %d pods, more than the az-a worker's %d: %v", node, n, a, per)
		}
	}
	if a < 2 || a == replicas {
		t.Errorf("the az-a worker holds %d of %d pods, want it filled (at most 4 fit) before any other: %v", a, replicas, per)
	}
	if len(per) != 2 {
		t.Errorf("pods on %d nodes, want the az-a worker and one other (bin-packing; stock spreading uses both others): %v", len(per), per)
	}
}

// cpuMilli parses a Kubernetes CPU quantity as kubectl prints allocatable ("2", "1900m").
func cpuMilli(q string) (int, error) {
	if m, ok := strings.CutSuffix(q, "m"); ok {
		return strconv.Atoi(m)
	}
	n, err := strconv.Atoi(q)
	return n * 1000, err
}
