package schedule

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/provision"
)

// scriptHost runs each command locally with sh, every absolute path hactl manages moved under root.
type scriptHost struct {
	root string
	env  []string
}

func (h scriptHost) Run(ctx context.Context, _ string, command string, _ ...provision.RunOption) (provision.Result, error) {
	for _, prefix := range []string{"/etc/", "/usr/local/bin/"} {
		command = strings.ReplaceAll(command, " "+prefix, " "+h.root+prefix)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Env = append(os.Environ(), h.env...)
	out, err := cmd.Output()
	return provision.Result{Stdout: out}, err
}

func (scriptHost) Upload(context.Context, string, []provision.File) error { return nil }

// TestDisableLeavesNothing runs Disable's script against a member's files under a temporary root,
// with a fake systemctl whose backup service is still running (activating) when the timer is
// stopped and writes both textfiles as it finishes, as a real run does: nothing hactl wrote is left
// (the certificates' textfile included, and the textfiles the run wrote after the timer stopped),
// the service was waited for before the files went, and a second run removes nothing.
func TestDisableLeavesNothing(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	root := t.TempDir()
	textDir := filepath.Join(root, "textfile")
	tf, cf := filepath.Join(textDir, TextfileName), filepath.Join(textDir, CertificatesTextfile)
	other := filepath.Join(textDir, "node.prom")
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range ManagedPaths() {
		write(root+p, "x")
	}
	write(root+ConfigPath, `{"cluster": "lab", "member": "cp-a", "textfile": "`+tf+`"}`)
	write(tf, "old")
	write(cf, "old")
	write(other, "not hactl's")
	bin := filepath.Join(root, "bin")
	calls := filepath.Join(root, "calls")
	write(filepath.Join(bin, "systemctl"), `#!/bin/sh
echo "$*" >> "$CALLS"
case "$1" in
show)
  n=$(cat "$CALLS.show" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$CALLS.show"
  if [ $n -lt 2 ]; then echo activating; exit 0; fi
  if [ $n -eq 2 ]; then echo run > "$TF"; echo run > "$CF"; fi
  echo inactive ;;
esac
`)
	if err := os.Chmod(filepath.Join(bin, "systemctl"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := scriptHost{root: root, env: []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "CALLS=" + calls, "TF=" + tf, "CF=" + cf}}
	removed, err := Disable(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tf, cf, root + ConfigPath} {
		if !slices.Contains(removed, p) {
			t.Errorf("%s not reported removed: %v", p, removed)
		}
	}
	for _, p := range append(ManagedPaths(), ConfigDir) {
		if _, err := os.Stat(root + p); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", p, err)
		}
	}
	for _, p := range []string{tf, cf} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left (written by the run that was still going?): %v", p, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another textfile was removed: %v", err)
	}
	log, _ := os.ReadFile(calls)
	var order []string
	for _, l := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		order = append(order, strings.Fields(l)[0])
	}
	if want := []string{"disable", "show", "show", "stop", "daemon-reload", "reset-failed"}; !slices.Equal(order, want) {
		t.Errorf("systemctl calls %v, want %v:\n%s", order, want, log)
	}
	if again, err := Disable(context.Background(), h); err != nil || len(again) != 0 {
		t.Errorf("second Disable: %v, %v", again, err)
	}
}
