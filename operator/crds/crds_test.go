package crds

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesUpToDate regenerates the CRDs and the API's deepcopy methods with the pinned
// controller-gen (bin/controller-gen, hack/build-controller-gen.sh) into a temp dir and compares
// them with the committed ones: a type changed without `make generate` fails here. Without the
// binary the test is skipped, or fails when HACTL_REQUIRE_CONTROLLER_GEN=1 (make unit sets it).
func TestGeneratedFilesUpToDate(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(root, "bin", "controller-gen")
	if _, err := os.Stat(gen); err != nil {
		msg := "bin/controller-gen missing: run hack/build-controller-gen.sh (make controller-gen)"
		if os.Getenv("HACTL_REQUIRE_CONTROLLER_GEN") == "1" {
			t.Fatal(msg + " (HACTL_REQUIRE_CONTROLLER_GEN=1)")
		}
		t.Skip(msg)
	}
	out := t.TempDir()
	// Deepcopy is written next to the types: generate into a copy of the API package.
	api := filepath.Join(out, "api")
	if err := os.MkdirAll(api, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), gen, "crd", "paths=./operator/api/...", "output:crd:dir="+filepath.Join(out, "crds"))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen crd: %v\n%s", err, b)
	}
	generated, err := filepath.Glob(filepath.Join(out, "crds", "*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("controller-gen wrote no CRD (%v)", err)
	}
	committed, names, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(generated) {
		t.Errorf("%d committed CRDs, controller-gen writes %d: run make generate", len(names), len(generated))
	}
	for _, p := range generated {
		want, _ := os.ReadFile(p)
		if got := committed[filepath.Base(p)]; !bytes.Equal(got, want) {
			t.Errorf("operator/crds/%s is not what controller-gen generates from operator/api/v1alpha1: run make generate", filepath.Base(p))
		}
	}

	// Deepcopy: controller-gen object writes zz_generated.deepcopy.go into the package it reads, so
	// it runs on a copy of the package inside the module (a temp dir under operator/api).
	tmp, err := os.MkdirTemp(filepath.Join(root, "operator", "api"), "gencheck-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	src := filepath.Join(root, "operator", "api", "v1alpha1")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "zz_generated.deepcopy.go" || filepath.Ext(e.Name()) != ".go" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rel, _ := filepath.Rel(root, tmp)
	cmd = exec.CommandContext(t.Context(), gen, "object", "paths=./"+rel)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen object: %v\n%s", err, b)
	}
	want, err := os.ReadFile(filepath.Join(tmp, "zz_generated.deepcopy.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(src, "zz_generated.deepcopy.go"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("operator/api/v1alpha1/zz_generated.deepcopy.go is not what controller-gen generates (%v): run make generate", err)
	}
}
