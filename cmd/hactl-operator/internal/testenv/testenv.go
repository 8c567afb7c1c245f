// Package testenv starts a real kube-apiserver (and its etcd) for the operator's tests with
// controller-runtime's envtest, hactl's CRDs installed, from the pinned binaries in the
// repository's bin/ (make etcd-bins kubernetes-bins): admission by the CRDs' schema and CEL rules is
// the API server's own, never imitated.
package testenv

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// RepoRoot is the repository's root directory (three levels above this package's module).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		t.Fatal("testenv: no caller information")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
}

// Scheme has client-go's built-in types and hactl.io/v1alpha1.
func Scheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := hactlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Start starts the API server with operator/crds installed and stops it at the test's end. It
// fails the test (never skips) when bin/ lacks kube-apiserver or etcd.
func Start(t testing.TB) (*rest.Config, client.Client) {
	t.Helper()
	root := RepoRoot(t)
	bin := filepath.Join(root, "bin")
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("testenv: %v: run make etcd-bins kubernetes-bins", err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{filepath.Join(root, "operator", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("testenv: start kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("testenv: stop: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: Scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}
