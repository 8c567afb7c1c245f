package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupScheduleValidation: every bad input exits 2 naming the problem before any host is
// contacted (the spec's hosts are unroutable documentation addresses and no SSH key exists).
func TestBackupScheduleValidation(t *testing.T) {
	spec := backupSpec(t, "127.0.0.1:9", "")
	noBackup := filepath.Join(t.TempDir(), "nobackup.yaml")
	raw, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noBackup, []byte(strings.Split(string(raw), "  backup:")[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no interval", nil, []string{"-f", spec, "--keep-last", "3"}, "--every is required"},
		{"under a minute", nil, []string{"-f", spec, "--every", "10s", "--keep-last", "3"}, "--allow-short-interval"},
		{"not on wall-clock slots", nil, []string{"-f", spec, "--every", "7m", "--keep-last", "3"}, "--every 7m0s: must divide an hour evenly"},
		{"sub-minute not dividing a minute", nil, []string{"-f", spec, "--every", "7s", "--allow-short-interval", "--keep-last", "3"}, "dividing a minute"},
		{"keeps nothing", nil, []string{"-f", spec, "--every", "5m"}, "keeps no snapshot"},
		{"negative retention", nil, []string{"-f", spec, "--every", "5m", "--keep-last", "-1"}, "must not be negative"},
		{"relative textfile dir", nil, []string{"-f", spec, "--every", "5m", "--keep-last", "3", "--textfile-dir", "prom"}, "must be an absolute path"},
		{"no spec.backup", nil, []string{"-f", noBackup, "--every", "5m", "--keep-last", "3"}, "spec.backup is not set"},
		{"missing credentials", map[string]string{"HACTL_TEST_S3_SECRET": ""}, []string{"-f", spec, "--every", "5m", "--keep-last", "3"}, "HACTL_TEST_S3_SECRET"},
		{"not an ELF binary", nil, []string{"-f", spec, "--every", "5m", "--keep-last", "3", "--hactl-binary", spec}, "not a Linux (ELF) binary"},
		{"no state dir", nil, []string{"-f", spec, "--every", "5m", "--keep-last", "3", "--yes"}, "has `hactl bootstrap` run"},
		{"status and disable", nil, []string{"-f", spec, "--status", "--disable"}, "give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SSH_AUTH_SOCK", "/nonexistent/agent.sock") // a login method, so the checks after it run
			t.Setenv("HACTL_TEST_S3_ACCESS", "access")
			t.Setenv("HACTL_TEST_S3_SECRET", "secret-key")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, stderr, code := runCmd(t, append([]string{"backup", "schedule"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 2 saying %q:\n%s", code, tc.want, stderr)
			}
			if strings.Contains(stderr, "secret-key") {
				t.Errorf("the secret key is in the output:\n%s", stderr)
			}
		})
	}
}

// TestBackupNowSlotFlags: --slot-every is checked before anything is contacted.
func TestBackupNowSlotFlags(t *testing.T) {
	spec := backupSpec(t, "127.0.0.1:9", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--slot-every", "7m"}, "--slot-every: --every 7m0s"},
		{[]string{"--slot-every", "5m", "--slot", "20261201T030500Z"}, "give one"},
		{[]string{"--slot-every", "5m", "--keep-last", "-2"}, "must not be negative"},
	} {
		_, stderr, code := runCmd(t, append([]string{"backup", "now", "-f", spec}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("backup now %v: exit %d, want 2 saying %q:\n%s", tc.args, code, tc.want, stderr)
		}
	}
}
