package app

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCompletions: flag values and arguments complete from the spec -f names (hosts by role, zones,
// lists without the items already given) and from fixed sets (methods, components, -o).
func TestCompletions(t *testing.T) {
	spec := filepath.Join("..", "..", "..", "specload", "testdata", "valid-lb-dedicated.yaml")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"drill", "az-outage", "-f", spec, "--zone", ""}, "az-a\naz-b\naz-c\n"},
		{[]string{"etcd", "member", "remove", "-f", spec, "cp-a", ""}, "cp-b\ncp-c\n"},
		{[]string{"etcd", "member", "replace", "-f", spec, ""}, "cp-a\ncp-b\ncp-c\n"},
		{[]string{"bootstrap", "-f", spec, "--replace-lost", "cp-b,"}, "cp-b,cp-a\ncp-b,cp-c\n"},
		{[]string{"reset", "-f", spec, "--hosts", "lb"}, "lb-a\nlb-b\n"},
		{[]string{"backup", "now", "-f", spec, "--member", ""}, "cp-a\ncp-b\ncp-c\n"},
		{[]string{"drill", "kill-leader", "--method", ""}, "process\nhost\nnetwork\ngraceful\n"},
		{[]string{"drill", "lb-failover", "--component", ""}, "haproxy\nkeepalived\nkube-apiserver\n"},
		{[]string{"status", "-o", ""}, "table\njson\nyaml\n"},
		{[]string{"explain", "spec.etcd.data"}, "spec.etcd.dataDir\n"},
		{[]string{"drill", "az-outage", "-f", filepath.Join(t.TempDir(), "none.yaml"), "--zone", ""}, ""}, // no spec: nothing
		{[]string{"drill", "az-outage", "-f", fifo(t), "--zone", ""}, ""},                                 // a FIFO is not read (it would block)
		{[]string{"explain", "spec.scheduler.pl"}, "spec.scheduler.plugins.\n"},                           // a map of objects goes on
	} {
		out, _, code := runCmd(t, append([]string{"__complete"}, tt.args...)...)
		got := out
		if i := strings.LastIndex(out, ":"); i >= 0 {
			got = out[:i]
		}
		if code != 0 || got != tt.want {
			t.Errorf("%v: exit %d, completes %q, want %q", tt.args, code, got, tt.want)
		}
	}
}

// fifo returns a named pipe nobody writes to.
func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
