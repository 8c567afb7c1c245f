package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// downKubeconfig is a kubeconfig whose one context, "gone", names a server nothing listens on.
func downKubeconfig(t *testing.T) string {
	t.Helper()
	kc := `apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: gone
  context: {cluster: gone, user: u}
current-context: gone
`
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every command that takes --kubeconfig honours --context: an unknown context exits 1 naming it and
// the contexts the file has; a server that does not answer exits 1 naming context and server;
// --context without --kubeconfig is bad usage (exit 2).
func TestKubeconfigContext(t *testing.T) {
	kc := downKubeconfig(t)
	spec := filepath.Join(t.TempDir(), "cluster.yaml") // not there: the standalone modes
	commands := [][]string{
		{"scheduler", "status"},
		{"scheduler", "remove", "--yes"},
		{"maintenance", "start", "w-a"},
		{"drill", "kill-leader", "--target", "lease/kube-system/hactl-scheduler", "--yes"},
		{"operator", "remove", "--yes"},
	}
	for _, args := range commands {
		args = append(args, "-f", spec)
		_, stderr, code := runCmd(t, append(args, "--kubeconfig", kc, "--context", "nope")...)
		if code != 1 || !strings.Contains(stderr, `context "nope" does not exist; its contexts: "gone"`) {
			t.Errorf("%v --context nope: exit %d, want 1 naming the context:\n%s", args, code, stderr)
		}
		_, stderr, code = runCmd(t, append(args, "--context", "gone")...)
		if code != 2 || !strings.Contains(stderr, "--context") {
			t.Errorf("%v --context without --kubeconfig: exit %d, want 2:\n%s", args, code, stderr)
		}
	}
	for _, args := range commands[:4] { // no spec file (the default cluster.yaml is not here); operator remove needs one and its state first
		_, stderr, code := runCmd(t, append(args, "--kubeconfig", kc, "--context", "gone")...)
		if code != 1 || !strings.Contains(stderr, `context "gone"`) || !strings.Contains(stderr, "https://127.0.0.1:1 does not answer") {
			t.Errorf("%v, server down: exit %d, want 1 naming context and server:\n%s", args, code, stderr)
		}
	}
}

// TestSchedulerFlagsOverAStrayClusterYAML: through --kubeconfig without -f, --replicas and
// --preferred-zone are the spec even when a cluster.yaml sits in the working directory (a CI
// workspace); with -f they are refused, naming the spec.
func TestSchedulerFlagsOverAStrayClusterYAML(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("cluster.yaml", []byte("apiVersion: hactl.io/v1alpha1\nkind: Cluster\nmetadata: {name: stray}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := downKubeconfig(t)
	out, stderr, code := runCmd(t, "scheduler", "deploy", "--kubeconfig", kc, "--image", "ghcr.io/hactl/hactl-scheduler:v1", "--replicas", "2", "--preferred-zone", "az-a=100", "--dry-run")
	if code != 0 || !strings.Contains(out, "replicas: 2") || !strings.Contains(out, "az-a") {
		t.Errorf("flags beside a stray cluster.yaml: exit %d\n%s\n%s", code, out, stderr)
	}
	_, stderr, code = runCmd(t, "scheduler", "deploy", "-f", "cluster.yaml", "--kubeconfig", kc, "--image", "ghcr.io/hactl/hactl-scheduler:v1", "--replicas", "2", "--dry-run")
	if code != 2 || !strings.Contains(stderr, "--replicas is for --kubeconfig without -f; with the spec cluster.yaml set spec.scheduler there instead") {
		t.Errorf("-f and --replicas: exit %d, want 2:\n%s", code, stderr)
	}
}
