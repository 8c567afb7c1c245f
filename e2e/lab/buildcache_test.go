package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildcache runs script after sourcing hack/lib/buildcache.sh, with the cache in cache, and
// returns its combined output and whether it exited 0.
func buildcache(t *testing.T, cache, script string) (string, bool) {
	t.Helper()
	lib, err := filepath.Abs(filepath.Join("..", "..", "hack", "lib", "buildcache.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", ". "+lib+"\n"+script)
	cmd.Env = append(os.Environ(), "HACTL_BUILD_CACHE="+cache)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("bash: %v", err)
		}
	}
	return string(out), err == nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBuildCache: hack/lib/buildcache.sh restores nothing from an empty cache or an entry lacking a
// path, stores a build's files and directories and copies them into another bin/ (copies: changing
// the restored file leaves the entry as it was), keeps the first entry stored under a key, and keys
// on the salt and the files' contents.
func TestBuildCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	bin := filepath.Join(dir, "bin")
	bin2 := filepath.Join(dir, "bin2")

	if out, ok := buildcache(t, cache, "buildcache_restore tool k1 "+bin2+" etcd"); ok {
		t.Fatalf("restore from an empty cache succeeded: %s", out)
	}
	if _, err := os.Stat(bin2); !os.IsNotExist(err) {
		t.Fatalf("restore from an empty cache created %s (%v)", bin2, err)
	}

	writeFile(t, filepath.Join(bin, "etcd"), "etcd v1")
	writeFile(t, filepath.Join(bin, "kind-v1", "kind"), "kind v1")
	if out, ok := buildcache(t, cache, "buildcache_store tool k1 "+bin+" etcd kind-v1"); !ok {
		t.Fatalf("store: %s", out)
	}
	writeFile(t, filepath.Join(bin, "etcd"), "etcd v2")
	if out, ok := buildcache(t, cache, "buildcache_store tool k1 "+bin+" etcd kind-v1"); !ok {
		t.Fatalf("second store: %s", out)
	}

	writeFile(t, filepath.Join(bin2, "etcd"), "stale")
	out, ok := buildcache(t, cache, "buildcache_restore tool k1 "+bin2+" etcd kind-v1")
	if !ok || !strings.Contains(out, "restored etcd kind-v1 from the build cache (tool-k1)") {
		t.Fatalf("restore: ok=%v %s", ok, out)
	}
	if got := readFile(t, filepath.Join(bin2, "etcd")); got != "etcd v1" {
		t.Errorf("restored etcd = %q, want the first stored build %q", got, "etcd v1")
	}
	if got := readFile(t, filepath.Join(bin2, "kind-v1", "kind")); got != "kind v1" {
		t.Errorf("restored kind-v1/kind = %q", got)
	}
	if fi, err := os.Stat(filepath.Join(bin2, "etcd")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("restored etcd lost its mode: %v %v", fi.Mode(), err)
	}
	writeFile(t, filepath.Join(bin2, "etcd"), "rebuilt in place")
	if got := readFile(t, filepath.Join(cache, "tool-k1", "etcd")); got != "etcd v1" {
		t.Errorf("writing the restored file changed the cache entry: %q", got)
	}

	if out, ok := buildcache(t, cache, "buildcache_restore tool k1 "+bin2+" etcd etcdctl"); ok {
		t.Errorf("restore of a path the entry lacks succeeded: %s", out)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("cache holds %d entries, want 1 (no temporary directory left): %v", len(entries), entries)
	}

	input := filepath.Join(dir, "build.sh")
	writeFile(t, input, "v1")
	key := func(salt string) string {
		out, ok := buildcache(t, cache, "BUILDCACHE_SALT='"+salt+"' buildcache_key "+input)
		if !ok || len(strings.TrimSpace(out)) != 16 {
			t.Fatalf("key: ok=%v %q", ok, out)
		}
		return strings.TrimSpace(out)
	}
	k1 := key("3.6.16")
	if k := key("3.6.16"); k != k1 {
		t.Errorf("same inputs, keys %s and %s", k1, k)
	}
	if k := key("3.6.17"); k == k1 {
		t.Errorf("another salt kept the key %s", k)
	}
	writeFile(t, input, "v2")
	if k := key("3.6.16"); k == k1 {
		t.Errorf("another input kept the key %s", k)
	}
}
