package lease

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSignalContainerScript runs the script with a fake ctr on PATH that lists two containers of
// the pod (one stopped) and one of another pod: only the running task of the pod's container is
// signalled, and a pod with no running container exits 91 naming it.
func TestSignalContainerScript(t *testing.T) {
	victim := exec.Command("sleep", "60")
	other := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{victim, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
	}
	dir := t.TempDir()
	// containers ls -q FILTER: the IDs whose labels match FILTER (pod p1's "operator" container has
	// a stopped and a running task; pod p2's runs).
	ctr := fmt.Sprintf(`#!/bin/sh
case "$*" in
*"containers ls -q labels.\"io.kubernetes.container.name\"==operator,labels.\"io.kubernetes.pod.name\"==p1") echo old1; echo new1 ;;
*"containers ls -q labels.\"io.kubernetes.container.name\"==operator,labels.\"io.kubernetes.pod.name\"==p2") echo run2 ;;
*"containers ls -q"*) ;;
*"tasks ls")
  echo "TASK    PID    STATUS"
  echo "old1    1      STOPPED"
  echo "new1    %d    RUNNING"
  echo "run2    %d    RUNNING" ;;
esac
`, victim.Process.Pid, other.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, "ctr"), []byte(ctr), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(pod string) (string, int) {
		cmd := exec.Command("sh", "-c", SignalContainerScript(pod, "operator", "KILL"))
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run("p1"); code != 0 {
		t.Fatalf("p1: exit %d: %s", code, out)
	}
	done := make(chan error, 1)
	go func() { done <- victim.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("p1's container: %v, want killed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("p1's running container was not signalled")
	}
	// A killed child stays a zombie (state Z) until it is waited for.
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", other.Process.Pid)); err != nil || strings.Fields(string(stat))[2] == "Z" {
		t.Errorf("p2's container was signalled too (%v): %s", err, stat)
	}
	if out, code := run("p3"); code != 91 || !strings.Contains(out, "no running container operator in pod p3") {
		t.Errorf("p3: exit %d, %q; want 91 naming the container and pod", code, out)
	}
}
