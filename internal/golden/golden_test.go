package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records what Check reports.
type recorder struct {
	testing.TB
	errs  []string
	fatal bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, format)
}
func (r *recorder) Fatalf(format string, a ...any) { r.fatal = true; r.errs = append(r.errs, format) }
func (r *recorder) Fatal(a ...any)                 { r.fatal = true }

func TestCheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "x.golden")
	r := &recorder{TB: t}
	check(r, p, []byte("a\n"), false, "go test -update")
	if !r.fatal || !strings.Contains(r.errs[0], "to create it") {
		t.Errorf("missing file: %+v", r)
	}
	r = &recorder{TB: t}
	check(r, p, []byte("a\n"), true, "go test -update")
	if b, err := os.ReadFile(p); err != nil || string(b) != "a\n" || len(r.errs) != 0 {
		t.Errorf("update wrote %q, %v; reports %q", b, err, r.errs)
	}
	check(r, p, []byte("a\n"), false, "go test -update")
	if len(r.errs) != 0 {
		t.Errorf("same content reported: %q", r.errs)
	}
	check(r, p, []byte("b\n"), false, "go test -update")
	if len(r.errs) != 1 || r.fatal {
		t.Errorf("different content: %+v", r)
	}
}

func TestDiffLines(t *testing.T) {
	for _, tc := range []struct{ want, got, diff string }{
		{"a\nb\n", "a\nb\n", ""},
		{"a\nb\n", "a\nc\n", "line 2:\n- b\n+ c\n"},
		{"a\n", "a\nb\n", "line 2:\n- \n+ b\n"},
	} {
		if got := diffLines(tc.want, tc.got); got != tc.diff {
			t.Errorf("diffLines(%q, %q) = %q, want %q", tc.want, tc.got, got, tc.diff)
		}
	}
}
