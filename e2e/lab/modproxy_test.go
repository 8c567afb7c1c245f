package lab

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
)

// TestWriteModuleProxy serves this repository's root module from a file:// proxy and has the go
// command itself download it (into a throwaway module cache): the zip passes the go command's own
// checks, holds cmd/hactl and none of the nested modules, and the same sources give the same version.
func TestWriteModuleProxy(t *testing.T) {
	ctx := context.Background()
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	p, err := WriteModuleProxy(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !module.IsPseudoVersion(p.Version) {
		t.Errorf("version %s is not a pseudo-version", p.Version)
	}
	again, err := WriteModuleProxy(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if again.Version != p.Version {
		t.Errorf("the same sources gave %s, then %s", p.Version, again.Version)
	}
	cache := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", ModulePath+"@"+p.Version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), append(p.Environ("off"), "GOMODCACHE="+cache, "GOFLAGS=-modcacherw")...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download: %v\n%s", err, out)
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Error != "" {
		t.Fatalf("go mod download: %v %s\n%s", err, dl.Error, out)
	}
	if _, err := os.Stat(filepath.Join(dl.Dir, "cmd", "hactl", "main.go")); err != nil {
		t.Errorf("the module has no cmd/hactl: %v", err)
	}
	// An untracked file in the working tree (a lab dir's key, a build) stays out.
	stray := filepath.Join(root, "e2e", "lab", "untracked-modproxy-probe.go")
	if err := os.WriteFile(stray, []byte("package lab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stray)
	third, err := WriteModuleProxy(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if third.Version != p.Version {
		t.Errorf("an untracked file changed the module: %s, then %s", p.Version, third.Version)
	}
	for _, nested := range []string{"scheduler/go.mod", "cmd/hactl-operator/go.mod"} {
		if _, err := os.Stat(filepath.Join(dl.Dir, nested)); err == nil {
			t.Errorf("the module zip holds the nested module %s", strings.TrimSuffix(nested, "/go.mod"))
		}
	}
}
