//go:build e2e

package lab

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLabIntegration exercises the whole lab against docker (part of the e2e suite: build tag e2e,
// run by `make e2e`; it replaces any running hactl-lab).
func TestLabIntegration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	l, err := Up(ctx, Options{Members: 3, Dir: t.TempDir(), Logf: t.Logf, Debugf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up (3 hosts) took %s", time.Since(start))
	defer func() {
		if err := l.Down(context.Background()); err != nil {
			t.Error(err)
		}
		if left := labObjects(t); left != "" {
			t.Errorf("left after Down: %s", left)
		}
	}()

	hostname := func(host string) string {
		t.Helper()
		c, err := l.Dial(ctx, host)
		if err != nil {
			t.Fatalf("dial %s: %v", host, err)
		}
		defer c.Close()
		out, err := sshRun(c, "hostname")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, h := range l.Hosts() {
		if got := hostname(h.Name); got != h.Name {
			t.Errorf("ssh %s: hostname %q", h.Name, got)
		}
	}
	if out, err := l.Exec(ctx, "cp-a", "systemctl", "is-enabled", "haproxy"); err == nil || strings.TrimSpace(out) != "disabled" {
		t.Errorf("haproxy on cp-a: %q, %v; want disabled", out, err)
	}
	// Every host has its own host key.
	keys := map[string]string{}
	for _, h := range l.Hosts() {
		out, err := l.Exec(ctx, h.Name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
		if err != nil {
			t.Fatal(err)
		}
		k := strings.Fields(out)[1]
		if other, dup := keys[k]; dup {
			t.Errorf("%s and %s share a host key", h.Name, other)
		}
		keys[k] = h.Name
	}

	// Kill + Start: same disk, same host key, sshd answers again.
	if err := l.Kill(ctx, "cp-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Dial(ctx, "cp-b"); err == nil {
		t.Error("ssh into a killed host succeeded")
	}
	t0 := time.Now()
	if err := l.Start(ctx, "cp-b"); err != nil {
		t.Fatal(err)
	}
	t.Logf("start after kill took %s", time.Since(t0))
	if got := hostname("cp-b"); got != "cp-b" {
		t.Errorf("after restart: hostname %q", got)
	}

	// Recreate: new container, new host key, known_hosts updated.
	before, _ := os.ReadFile(l.KnownHostsFile())
	t0 = time.Now()
	if err := l.Recreate(ctx, "cp-c"); err != nil {
		t.Fatal(err)
	}
	t.Logf("recreate took %s", time.Since(t0))
	after, _ := os.ReadFile(l.KnownHostsFile())
	if string(before) == string(after) {
		t.Error("known_hosts unchanged after Recreate")
	}
	if got := hostname("cp-c"); got != "cp-c" {
		t.Errorf("after recreate: hostname %q", got)
	}
}

// labObjects lists docker objects named with the lab prefix.
func labObjects(t *testing.T) string {
	var left []string
	d := docker{}
	for _, args := range [][]string{
		{"ps", "-a", "--format", "{{.Names}}"},
		{"network", "ls", "--format", "{{.Name}}"},
		{"volume", "ls", "--format", "{{.Name}}"},
	} {
		out, err := d.run(context.Background(), nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range strings.Fields(out) {
			if isLabName(n) {
				left = append(left, n)
			}
		}
	}
	return strings.Join(left, " ")
}
