package app

import (
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want snapshotSource
		err  string
	}{
		{in: "./snap.db", want: snapshotSource{local: "./snap.db"}},
		{in: "/var/backups/snap.db", want: snapshotSource{local: "/var/backups/snap.db"}},
		{in: "file:///var/backups/snap.db", want: snapshotSource{local: "/var/backups/snap.db"}},
		{in: "latest", want: snapshotSource{latest: true}},
		{in: "s3://backups/prod/lab/snapshots/x.db.zst", want: snapshotSource{bucket: "backups", key: "prod/lab/snapshots/x.db.zst"}},
		{in: "", err: "--from is required"},
		{in: "s3://backups", err: "want s3://BUCKET/KEY"},
		{in: "s3:///key", err: "want s3://BUCKET/KEY"},
		{in: "gs://b/k", err: `unknown scheme "gs"`},
		{in: "https://minio:9000/b/k", err: `unknown scheme "https"`},
	} {
		got, err := parseSource("--from", tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || ExitCode(err) != 2 {
				t.Errorf("%q: %v (exit %d); want exit 2 saying %q", tc.in, err, ExitCode(err), tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

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
