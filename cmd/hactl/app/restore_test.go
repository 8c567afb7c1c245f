package app

import (
	"strings"
	"testing"
)

// TestRestoreUsageErrors: bad sources and a missing --yes without a terminal exit 2 before anything
// is read or contacted.
func TestRestoreUsageErrors(t *testing.T) {
	spec := writeKubeadmSpec(t, true)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "-f", spec}, "--from is required"},
		{[]string{"restore", "-f", spec, "--from", "gs://b/k", "--yes"}, `unknown scheme "gs"`},
		{[]string{"restore", "-f", spec, "--from", "latest", "--yes", "-o", "yaml"}, "yaml"},
		{[]string{"bootstrap", "-f", spec, "--restore-from", "ftp://x/y"}, `--restore-from ftp://x/y: unknown scheme "ftp"`},
	} {
		_, stderr, code := runCmd(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", tc.args, code, stderr, tc.want)
		}
	}
}
