package images

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/ui"
)

// fakeKind writes a kind stand-in that lists nodes for `get nodes --name ci` and records every
// load into a file; it returns the stand-in's path and the record's.
func fakeKind(t *testing.T, nodes ...string) (kind, loads string) {
	t.Helper()
	dir := t.TempDir()
	kind, loads = filepath.Join(dir, "kind"), filepath.Join(dir, "loads")
	script := `#!/bin/sh
case "$1 $2" in
"get nodes") [ "$4" != ci ] && echo "No kind nodes found for cluster \"$4\"." >&2 && exit 0; printf '%s\n' ` + strings.Join(nodes, " ") + ` ;;
"load image-archive") echo "$@" >> ` + loads + ` ;;
esac
`
	if err := os.WriteFile(kind, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return kind, loads
}

func apiWith(nodes map[string]string) *kubeapi.Client {
	var objs []corev1.Node
	cs := fake.NewClientset()
	for name, arch := range nodes {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture = "linux", arch
		objs = append(objs, n)
	}
	for i := range objs {
		_, _ = cs.CoreV1().Nodes().Create(context.Background(), &objs[i], metav1.CreateOptions{})
	}
	return &kubeapi.Client{Interface: cs, Via: "kubeconfig ci.conf (context kind-ci, server https://127.0.0.1:6443)"}
}

// TestKindLoad: the archive is loaded only into the kind cluster whose nodes are the kubeconfig's,
// and only when every node can run it; a refusal is a usage error (exit 2) that names why, and
// nothing is loaded.
func TestKindLoad(t *testing.T) {
	amd64 := []Platform{{OS: "linux", Architecture: "amd64"}}
	arm64 := []Platform{{OS: "linux", Architecture: "arm64"}}
	two := map[string]string{"ci-control-plane": "amd64", "ci-worker": "amd64"}
	for _, tc := range []struct {
		name      string
		cluster   string
		kindNodes []string
		api       map[string]string
		platforms []Platform
		want      string // "" : loaded
	}{
		{"loaded", "ci", []string{"ci-worker", "ci-control-plane"}, two, amd64, ""},
		{"no such kind cluster", "other", []string{"ci-worker"}, two, amd64, "kind has no cluster of that name"},
		{"another cluster's kubeconfig", "ci", []string{"ci-control-plane", "ci-worker", "ci-worker2"}, two, amd64, "are not the nodes of the cluster kubeconfig ci.conf"},
		{"foreign image", "ci", []string{"ci-worker", "ci-control-plane"}, two, arm64, "linux/arm64 only; these nodes cannot run it: ci-control-plane (linux/amd64)"},
		{"one foreign node", "ci", []string{"ci-worker", "ci-control-plane"}, map[string]string{"ci-control-plane": "amd64", "ci-worker": "arm64"}, amd64, "ci-worker (linux/arm64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, loads := fakeKind(t, tc.kindNodes...)
			var log bytes.Buffer
			err := KindLoad(context.Background(), apiWith(tc.api), kind, tc.cluster, "/images/s.tar", tc.platforms, ui.New(&log, false, false))
			record, _ := os.ReadFile(loads)
			if tc.want == "" {
				if err != nil || string(record) != "load image-archive /images/s.tar --name ci\n" {
					t.Fatalf("err %v, loads %q", err, record)
				}
				return
			}
			var ue *exitcode.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a usage error containing %q", err, tc.want)
			}
			if len(record) != 0 {
				t.Errorf("refused, yet loaded: %q", record)
			}
		})
	}
}

// TestCheckKindFlags: --kind-cluster needs --kubeconfig and an archive (exit 2 before anything).
func TestCheckKindFlags(t *testing.T) {
	for _, tc := range [][3]string{{"ci", "", "a.tar"}, {"ci", "k.conf", ""}} {
		if _, err := CheckKindFlags(tc[0], tc[1], tc[2]); err == nil || !strings.Contains(err.Error(), "give both") {
			t.Errorf("%q: %v", tc, err)
		}
	}
	if kind, err := CheckKindFlags("", "", ""); kind != "" || err != nil {
		t.Errorf("no --kind-cluster: %q, %v", kind, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := CheckKindFlags("ci", "k.conf", "a.tar"); err == nil || !strings.Contains(err.Error(), "kind is not on PATH") {
		t.Errorf("no kind: %v", err)
	}
}
