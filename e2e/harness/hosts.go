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
