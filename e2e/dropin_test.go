//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestForeignDropInAndFailedStart: on the converged 5-member cluster, a drop-in hactl does not own
// for etcd on cp-a is shown by plan (host, file, setting) and refuses bootstrap (exit 1, naming host
// and file); kept with --allow-foreign-overrides, a drop-in that makes etcd's start fail is
// explained by the unit's own journal lines in bootstrap's error; once the file is removed,
// bootstrap passes and the cluster is healthy again. Nothing is reloaded while the first drop-in
// is there, so the running etcd never sees it.
func TestForeignDropInAndFailedStart(t *testing.T) {
	// The cluster the test before leaves (TestBootstrapFiveMembers' five members; bootstrapped from
	// scratch when this test runs alone, grown to five from three members).
	spec := specPath(t, 5)
	suite.MustHactl(t, "bootstrap", "-f", spec)
	const dropIn = "/etc/systemd/system/etcd.service.d/90-hactl-e2e.conf"
	write := func(content string) {
		t.Helper()
		suite.ExecOn(t, "cp-a", "sh", "-c", "mkdir -p /etc/systemd/system/etcd.service.d && printf '%s' \"$1\" > "+dropIn, "sh", content)
	}
	const putBack = "rm -f " + dropIn + "; rmdir /etc/systemd/system/etcd.service.d 2>/dev/null; systemctl daemon-reload; systemctl reset-failed etcd.service 2>/dev/null; true"
	restored := false
	t.Cleanup(func() {
		if !restored { // a step failed half-way: put cp-a back for the tests that follow
			suite.ExecOn(t, "cp-a", "sh", "-c", putBack)
			suite.MustHactl(t, "bootstrap", "-f", spec)
			waitHealthy(t, spec, 30*time.Second)
		}
	})

	// 1. A setting from outside the spec: shown by plan, refused by bootstrap.
	const setting = "Environment=ETCD_QUOTA_BACKEND_BYTES=1073741824"
	write("[Service]\n" + setting + "\n")
	r := suite.Hactl(t, "plan", "-f", spec)
	if want := "cp-a: drop-in " + dropIn + " sets " + setting + " for etcd.service"; r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, want) {
		t.Errorf("plan: exit %d, want 0 with the line %q", r.Code, want)
	}
	r = suite.Hactl(t, "bootstrap", "-f", spec)
	if out := r.Stdout + r.Stderr; r.Code != 1 || !strings.Contains(out, "host cp-a") || !strings.Contains(out, dropIn) || !strings.Contains(out, "--allow-foreign-overrides") {
		t.Errorf("bootstrap with a foreign drop-in: exit %d, want 1 naming host cp-a, %s and the flag", r.Code, dropIn)
	}

	// 2. A failed start explained: kept with the flag, a drop-in whose ExecStartPre fails; etcd
	// stopped on cp-a (the other four keep the quorum), so bootstrap starts it and it fails.
	write("[Service]\nExecStartPre=/bin/sh -c 'echo hactl-e2e: this start is refused on purpose >&2; exit 1'\n")
	suite.ExecOn(t, "cp-a", "systemctl", "stop", "etcd.service")
	r = suite.Hactl(t, "bootstrap", "-f", spec, "--allow-foreign-overrides")
	if out := r.Stdout + r.Stderr; r.Code != 1 || !strings.Contains(out, "journalctl -u etcd.service -n 20 --no-pager -o cat") ||
		!strings.Contains(out, "hactl-e2e: this start is refused on purpose") {
		t.Errorf("bootstrap with a failing start: exit %d, want 1 with etcd.service's journal lines", r.Code)
	}
	if !strings.Contains(r.Stdout+r.Stderr, "kept (--allow-foreign-overrides)") {
		t.Errorf("bootstrap --allow-foreign-overrides does not say it kept %s", dropIn)
	}

	// 3. The file removed: bootstrap passes, etcd runs on cp-a again and the cluster is healthy.
	suite.ExecOn(t, "cp-a", "sh", "-c", putBack)
	suite.MustHactl(t, "bootstrap", "-f", spec)
	waitHealthy(t, spec, 30*time.Second)
	restored = true
}
