package harness

import (
	"context"
	"strings"
	"testing"
)

// ExecOn runs args inside the lab host named host (docker exec: for assertions and fault
// injection, not for what hactl does) and returns its standard output, untrimmed. A command that
// fails fails the test (t.Fatalf, with its error, which carries the standard error, and output).
func (s *Suite) ExecOn(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := s.Lab.Exec(context.Background(), host, args...)
	if err != nil {
		t.Fatalf("on %s: %v\n%s", host, err, out)
	}
	return out
}

// Exists reports whether path exists on host (test -e in its container). A failed exec fails the
// test (t.Fatalf), so "absent" is never an exec that did not run.
func (s *Suite) Exists(t *testing.T, host, path string) bool {
	t.Helper()
	out := s.ExecOn(t, host, "sh", "-c", `if test -e "$1"; then echo yes; else echo no; fi`, "sh", path)
	return strings.TrimSpace(out) == "yes"
}

// UnitStarts returns each host's etcd.service MainPID and start time (systemctl show): unchanged
// values prove etcd was not restarted in between.
func (s *Suite) UnitStarts(t *testing.T, hosts []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, h := range hosts {
		out[h] = strings.TrimSpace(s.ExecOn(t, h, "systemctl", "show", "-p", "MainPID", "-p", "ExecMainStartTimestampMonotonic", "etcd.service"))
	}
	return out
}
