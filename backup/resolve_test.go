package backup

import (
	"strings"
	"testing"

	"github.com/hactl/hactl/internal/exitcode"
)

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Source
		err  string
	}{
		{in: "./snap.db", want: Source{local: "./snap.db"}},
		{in: "/var/backups/snap.db", want: Source{local: "/var/backups/snap.db"}},
		{in: "file:///var/backups/snap.db", want: Source{local: "/var/backups/snap.db"}},
		{in: "latest", want: Source{latest: true}},
		{in: "s3://backups/prod/lab/snapshots/x.db.zst", want: Source{bucket: "backups", key: "prod/lab/snapshots/x.db.zst"}},
		{in: "", err: "--from is required"},
		{in: "s3://backups", err: "want s3://BUCKET/KEY"},
		{in: "s3:///key", err: "want s3://BUCKET/KEY"},
		{in: "gs://b/k", err: `unknown scheme "gs"`},
		{in: "https://minio:9000/b/k", err: `unknown scheme "https"`},
	} {
		got, err := ParseSource("--from", tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || exitcode.Of(err) != 2 {
				t.Errorf("%q: %v (exit %d); want exit 2 saying %q", tc.in, err, exitcode.Of(err), tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
