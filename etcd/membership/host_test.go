package membership

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetireScript runs the script for real (without systemd: the unit step finds no unit): the data
// dir is moved aside and its new path printed; an existing target is refused with nothing moved; no
// data dir is no output and no error.
func TestRetireScript(t *testing.T) {
	run := func(dataDir string) (string, error) {
		out, err := exec.Command("sh", "-c", RetireScript(dataDir, "20261202T000000Z")).Output()
		return strings.TrimSpace(string(out)), err
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "etcd data") // a space: quoting
	if err := os.MkdirAll(filepath.Join(data, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := run(data)
	if err != nil || out != data+".removed-20261202T000000Z" {
		t.Fatalf("move: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(out, "member")); err != nil {
		t.Fatalf("the moved data dir lacks member/: %v", err)
	}
	if out, err := run(data); err != nil || out != "" {
		t.Fatalf("no data dir: %q %v, want nothing", out, err)
	}
	if err := os.MkdirAll(filepath.Join(data, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := run(data); err == nil {
		t.Fatal("moving onto an existing .removed- path: no error")
	}
	if _, err := os.Stat(filepath.Join(data, "member")); err != nil {
		t.Fatalf("the refused move touched the data dir: %v", err)
	}
}
