package kubephases

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
)

func testSpec() *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{
		Hosts: []v1alpha1.Host{
			{Name: "cp-a", Address: "10.0.0.11", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
			{Name: "w-a", Address: "10.0.0.31", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleWorker}},
		},
		Kubernetes: &v1alpha1.Kubernetes{Version: "v1.37.2", Binaries: v1alpha1.KubeBinaries{Kubelet: "/b/kubelet", Kubeadm: "/b/kubeadm", Kubectl: "/b/kubectl"}},
	}}
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{Base: "/"})
	return c
}

// testGroup is a group on testSpec with the given facts per node, planned parameters set.
func testGroup(t *testing.T, facts map[string]*nodeFacts) *Group {
	t.Helper()
	g, err := New(runctx.New(testSpec(), nil, false, provision.SpecOptions{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.facts = facts
	g.params = kubeadm.NodeParams{CgroupDriver: v1alpha1.CgroupDriverCgroupfs, CgroupV1: true, ImagePullPolicy: "IfNotPresent"}
	g.sums = map[string]string{"/b/kubelet": "sum-kubelet", "/b/kubeadm": "sum-kubeadm", "/b/kubectl": "sum-kubectl"}
	return g
}

func freshFacts() *nodeFacts {
	return &nodeFacts{PkgManager: "apt-get", Systemd: true, Sums: map[string]string{}, Have: map[string]bool{"iptables": true, "socat": true},
		Images: map[string]bool{}, Listen: map[int]bool{}}
}

// configured returns facts of a node where everything hactl writes is in place and joined.
func configured(t *testing.T, g *Group, n node) *nodeFacts {
	t.Helper()
	f := freshFacts()
	for _, c := range kubenode.RuntimeCommands {
		f.Have[c] = true
	}
	f.CNIBin, f.ContainerdVersion = "/usr/lib/cni", "1.6.20"
	f.Containerd = provision.UnitState{Active: "active", Enabled: "enabled"}
	f.Kubelet = provision.UnitState{Active: "active", Enabled: "enabled"}
	g.facts[n.host.Name] = f
	p, err := (&Plan{g}).planNode(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, df := range p.files {
		f.Sums[df.Path] = df.Sum
	}
	for _, a := range p.binaries {
		f.Sums[binPath(a.name)] = a.sum
	}
	f.Marker = "role=" + n.role()
	for _, k := range kubenode.KubeadmFiles {
		f.Sums[k] = "x"
	}
	return f
}

func TestPlanNode(t *testing.T) {
	g := testGroup(t, map[string]*nodeFacts{})
	ph := &Plan{g}
	cp, w := g.nodes[0], g.nodes[1]

	g.facts["w-a"] = freshFacts()
	p, err := ph.planNode(w)
	if err != nil {
		t.Fatal(err)
	}
	got := p.describe()
	for _, want := range []string{"install kubelet", "install kubeadm", "install containerd", "install runc", "install containernetworking-plugins",
		"install conntrack", "write /etc/containerd/config.toml", "write /etc/systemd/system/kubelet.service", "kubeadm join"} {
		if !slices.Contains(got, want) {
			t.Errorf("fresh worker: %v lacks %q", got, want)
		}
	}
	if slices.Contains(got, "install kubectl") || len(p.reset) > 0 || p.kubelet != "" {
		t.Errorf("fresh worker: kubectl on a worker, a reset or a kubelet start: %v", got)
	}
	if !strings.Contains(string(p.files[2].Data), "restrict_oom_score_adj = true") {
		t.Errorf("a host without CAP_SYS_RESOURCE needs restrict_oom_score_adj:\n%s", p.files[2].Data)
	}

	// Converged: nothing to do, and nothing for kubeadm.
	g.facts["cp-a"] = configured(t, g, cp)
	if p, _ := ph.planNode(cp); p.changes() {
		t.Errorf("converged control plane: %v", p.describe())
	}
	// A stopped kubelet on a joined node is started; a new kubelet binary restarts it.
	f := g.facts["cp-a"]
	f.Kubelet.Active = "inactive"
	if p, _ := ph.planNode(cp); !slices.Equal(p.describe(), []string{"start kubelet"}) {
		t.Errorf("stopped kubelet: %v", p.describe())
	}
	f.Kubelet.Active = "active"
	f.Sums[binPath("kubelet")] = "old"
	if p, _ := ph.planNode(cp); !slices.Equal(p.describe(), []string{"install kubelet", "restart kubelet"}) {
		t.Errorf("new kubelet binary: %v", p.describe())
	}
	// kubeadm's files without the marker: an interrupted join, reset first.
	f.Sums[binPath("kubelet")] = g.sums["/b/kubelet"]
	f.Marker = ""
	p, _ = ph.planNode(cp)
	if !slices.Equal(p.describe(), []string{"kubeadm reset", "kubeadm join"}) || len(p.reset) != len(kubenode.KubeadmFiles) {
		t.Errorf("interrupted join: %v (reset %v)", p.describe(), p.reset)
	}
}

func TestInstallScript(t *testing.T) {
	g := testGroup(t, map[string]*nodeFacts{})
	s := installScript(g.run.Spec.Spec.Kubernetes, []artifact{
		{name: "kubelet", dl: &v1alpha1.Download{URL: "http://mirror:8080/kubelet", SHA256: strings.Repeat("a", 64)}, sum: strings.Repeat("a", 64)},
		{name: "kubeadm", local: "/b/kubeadm", sum: "sum-kubeadm"},
	})
	mv := strings.Index(s, "mv -f")
	for _, want := range []string{"curl -fsSL --retry 3 -o /usr/local/bin/kubelet.hactl-stage http://mirror:8080/kubelet", "exit 91", "/usr/local/bin/kubelet.hactl-stage --version",
		"/usr/local/bin/kubeadm.hactl-stage version -o short", "[ \"$v\" = v1.37.2 ]"} {
		i := strings.Index(s, want)
		if i < 0 || i > mv {
			t.Errorf("script lacks %q before the first rename:\n%s", want, s)
		}
	}
	if strings.Count(s, "sha256sum") != 1 {
		t.Errorf("the upload's sha256 is checked by the upload; only the download is hashed on the host:\n%s", s)
	}
	if strings.Count(s, "mv -f") != 2 {
		t.Errorf("two renames expected:\n%s", s)
	}
}

func TestBinaryFailure(t *testing.T) {
	g := testGroup(t, map[string]*nodeFacts{})
	n := g.nodes[1]
	arts := []artifact{{name: "kubelet", dl: &v1alpha1.Download{URL: "http://m/kubelet", SHA256: "want"}, sum: "want"}}
	err := binaryFailure(g.run.Spec.Spec.Kubernetes, n, arts, provision.Result{Stderr: []byte("checksum kubelet got123\n")}, &provision.CommandError{ExitCode: exitChecksum})
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Got != "got123" || ce.Want != "want" || ce.URL != "http://m/kubelet" || !strings.Contains(err.Error(), "nothing was installed") {
		t.Errorf("checksum failure: %v", err)
	}
	err = binaryFailure(g.run.Spec.Spec.Kubernetes, n, arts, provision.Result{Stderr: []byte("version kubelet Kubernetes v1.36.0\n")}, &provision.CommandError{ExitCode: exitVersion})
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Want != "v1.37.2" || !strings.Contains(ve.Got, "v1.36.0") {
		t.Errorf("version failure: %v", err)
	}
}

func TestWantedImages(t *testing.T) {
	refs := []string{"hactl-lab.local/probe:1", "registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/kube-proxy:v1.37.2", "registry.k8s.io/pause:3.10.2"}
	if got := wantedImages(refs, false); !slices.Equal(got, []string{"hactl-lab.local/probe:1", "registry.k8s.io/kube-proxy:v1.37.2", "registry.k8s.io/pause:3.10.2"}) {
		t.Errorf("worker images: %v", got)
	}
	if got := wantedImages(refs, true); !slices.Equal(got, refs) {
		t.Errorf("control-plane images: %v", got)
	}
}

// TestInstallScriptCleansUp runs the install script's failure path for real: a download whose
// sha256 is wrong must leave no staged file behind, the uploaded ones included.
func TestInstallScriptCleansUp(t *testing.T) {
	g := testGroup(t, map[string]*nodeFacts{})
	dir := t.TempDir()
	s := installScript(g.run.Spec.Spec.Kubernetes, []artifact{
		{name: "kubelet", dl: &v1alpha1.Download{URL: "file://" + dir + "/src", SHA256: strings.Repeat("a", 64)}, sum: strings.Repeat("a", 64)},
		{name: "kubeadm", local: "/b/kubeadm", sum: "x"},
	})
	s = strings.ReplaceAll(s, kubenode.BinDir, dir)
	if err := os.WriteFile(dir+"/src", []byte("not the binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/kubeadm"+stageSuffix, []byte("uploaded"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", s).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitChecksum {
		t.Fatalf("exit %v, want %d:\n%s", err, exitChecksum, out)
	}
	left, _ := filepath.Glob(dir + "/*" + stageSuffix)
	if len(left) > 0 {
		t.Errorf("staged files left after the failure: %v", left)
	}
}

func TestLoopbackResolvers(t *testing.T) {
	for conf, loop := range map[string]bool{
		"nameserver 127.0.0.11\noptions ndots:0\n": true,
		"nameserver 127.0.0.53\nnameserver ::1\n":  true,
		"# nothing\n": true,
		"nameserver 127.0.0.53\nnameserver 10.0.0.2\n": false,
		"search example.com\nnameserver 192.168.1.1\n": false,
	} {
		if got := loopbackResolvers([]byte(conf)) != nil; got != loop {
			t.Errorf("%q: loopback only %v, want %v", conf, got, loop)
		}
	}
}

// TestGuardedScript runs Group.kubeadm's command for real: when its standard input closes (hactl
// stopped), the step's process group is killed and no marker is written; when the step finishes,
// the marker is written and the configuration removed.
func TestGuardedScript(t *testing.T) {
	dir := t.TempDir()
	cfg, marker := dir+"/cfg.yaml", dir+"/marker/node"
	run := func(script string, stdin func(w *os.File)) (time.Duration, error) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", guardedScript(cfg, script, marker, "role=worker\n"))
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = r
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		stdin(w)
		err = cmd.Wait()
		return time.Since(start), err
	}
	// Abandoned: stdin closes after 300 ms; the 20 s step is killed, its child too.
	d, err := run("sleep 20 & wait; touch "+dir+"/finished", func(w *os.File) { time.Sleep(300 * time.Millisecond); w.Close() })
	if err == nil || d > 5*time.Second {
		t.Errorf("abandoned step: err %v after %s; want a failure within seconds", err, d)
	}
	time.Sleep(200 * time.Millisecond)
	for _, p := range []string{marker, dir + "/finished", cfg} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists after the step was abandoned", p)
		}
	}
	// Finished: the marker is written, stdin still open.
	var w *os.File
	if _, err := run("true", func(pw *os.File) { w = pw }); err != nil {
		t.Fatalf("finished step: %v", err)
	}
	w.Close()
	if b, err := os.ReadFile(marker); err != nil || string(b) != "role=worker\n" {
		t.Errorf("marker %q, %v", b, err)
	}
	if _, err := os.Stat(cfg); err == nil {
		t.Error("the configuration (secrets) was not removed")
	}
}

// TestGuardedScriptLeavesNothingRunning: once the step finished, no process of the command holds
// its output open (an SSH session would stay open until hactl released standard input: a
// deadlock), even while standard input stays open.
func TestGuardedScriptLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", guardedScript(dir+"/cfg", "true", dir+"/m/node", "x"))
	stdinR, stdinW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	outW.Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, outR); close(done) }()
	select {
	case <-done: // every writer of the output is gone
	case <-time.After(5 * time.Second):
		t.Error("a process of the finished step still holds its output open")
	}
	_ = cmd.Wait()
	stdinW.Close()
}
