package backup

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/exitcode"
)

// TestPrintListingAndPlan: the tables `backup list` and `backup prune` print, the counts line,
// orphans and incomplete uploads, and the listing's warnings for stderr.
func TestPrintListingAndPlan(t *testing.T) {
	var b bytes.Buffer
	(&Listing{Prefix: "lab/snapshots/"}).Print(&b)
	if b.String() != "no complete snapshot under lab/snapshots/\n" {
		t.Errorf("empty listing: %q", b.String())
	}
	l := synthetic([]string{"2026-12-01T01:00:00Z", "2026-12-01T02:00:00Z", "2026-12-01T03:00:00Z"}, 0)
	now := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	l.Orphans = []ObjectInfo{{Key: "lab/snapshots/x.db", LastModified: now.Add(-2 * time.Hour)}}
	l.Incomplete = []IncompleteUpload{{Key: "lab/snapshots/y.db", Initiated: now.Add(-3 * time.Hour)}}
	l.Problems = []string{"lab/snapshots/z.json: unexpected end of JSON input"}
	b.Reset()
	l.Print(&b)
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "TIME  ") ||
		!strings.Contains(lines[1], "2026-12-01T01:00:00Z") || !strings.HasSuffix(lines[3], l.Snapshots[2].Stem) {
		t.Errorf("listing:\n%s", b.String())
	}
	want := []string{
		"1 data object(s) without metadata and 1 unfinished upload(s) under lab/snapshots/ are not snapshots (prune removes them after --incomplete-older-than)",
		"unreadable metadata: lab/snapshots/z.json: unexpected end of JSON input",
	}
	if got := l.Warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings %q, want %q", got, want)
	}

	plan := Plan(l, Policy{KeepLast: 1}, now, time.Hour)
	if plan.Empty() {
		t.Error("a plan deleting a snapshot is empty")
	}
	b.Reset()
	plan.Print(&b)
	out := b.String()
	for _, s := range []string{
		"ACTION  TIME                  OBJECT",
		"keep    2026-12-01T03:00:00Z  " + l.Snapshots[2].Stem + ".db  last 1\n",
		"keep    2026-12-01T01:00:00Z  " + l.Snapshots[0].Stem + ".db  newest verified\n",
		"delete  2026-12-01T02:00:00Z  " + l.Snapshots[1].Stem + ".db  -\n",
		"delete orphan lab/snapshots/x.db (no metadata, modified 2026-12-01T02:00:00Z)\n",
		"abort incomplete upload lab/snapshots/y.db (started 2026-12-01T01:00:00Z)\n",
		"2 kept, 1 to delete\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("plan lacks %q:\n%s", s, out)
		}
	}
	if p := Plan(l, Policy{KeepLast: 3}, now, 24*time.Hour); !p.Empty() {
		t.Errorf("keeping everything with the orphans in their grace period: %+v", p)
	}

	b.Reset()
	(&VerifyResult{Key: "k.db", Revision: 7, TotalKeys: 3, Hash: 42, TotalSizeBytes: 20480, Duration: 1234567 * time.Nanosecond}).Print(&b)
	if b.String() != "k.db: OK (revision 7, 3 keys, hash 42, 20480 bytes, in 1ms)\n" {
		t.Errorf("verify result: %q", b.String())
	}
}

// TestSpecInputs: what the commands find locally before contacting anything is exit 2 and names
// the flag or field: spec.backup missing (naming what it is for), an identity file that is missing
// or not one, a local snapshot that does not exist or fails etcd's checks (exit 3).
func TestSpecInputs(t *testing.T) {
	c := &v1alpha1.Cluster{}
	err := CheckSpec(c, "cluster.yaml", "schedule backups", nil)
	if exitcode.Of(err) != exitcode.Invalid || err.Error() != "cluster.yaml: spec.backup is not set: add spec.backup.objectStore (endpoint, bucket, credentials) to schedule backups (`hactl init` shows an example)" {
		t.Errorf("CheckSpec without spec.backup: %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "identity")
	os.WriteFile(bad, []byte("nonsense\n"), 0o600)
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == IdentityEnv {
				return v
			}
			return ""
		}
	}
	if ids, err := IdentitiesFrom("", env("")); ids != nil || err != nil {
		t.Errorf("no identity file: %v, %v", ids, err)
	}
	for _, tc := range []struct{ file, env string }{{bad, ""}, {"", bad}, {filepath.Join(dir, "missing"), bad}} {
		_, err := IdentitiesFrom(tc.file, env(tc.env))
		if exitcode.Of(err) != exitcode.Invalid || !strings.HasPrefix(err.Error(), "--identity-file: ") {
			t.Errorf("IdentitiesFrom(%q) with $%s=%q: %v", tc.file, IdentityEnv, tc.env, err)
		}
	}
	src, _ := ParseSource("--from", filepath.Join(dir, "nope.db"))
	if _, err := Resolve(t.Context(), c, src, ResolveOptions{Flag: "--from"}); exitcode.Of(err) != exitcode.Invalid || !strings.Contains(err.Error(), "--from "+filepath.Join(dir, "nope.db")) {
		t.Errorf("Resolve of a missing file: %v", err)
	}
	src, _ = ParseSource("--restore-from", bad)
	if _, err := Resolve(t.Context(), c, src, ResolveOptions{Flag: "--restore-from"}); exitcode.Of(err) != exitcode.Verdict || !strings.Contains(err.Error(), "refused before any member was touched") {
		t.Errorf("Resolve of a file that is no snapshot: %v", err)
	}
}
