// Package golden compares a test's output with a golden file (testdata/...), or rewrites the file
// when the test runs with -update. It is for _test.go files only: importing it registers the test
// binary's -update flag, so a test package uses this flag and declares none of its own.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Update is the test binary's -update flag: Check rewrites the golden files instead of comparing.
var Update = flag.Bool("update", false, "rewrite the golden files (testdata/...) from the current output")

// Check compares got with the file at path, or with -update (Update) writes got there instead
// (creating the directory) and compares nothing. hint is the command that rewrites the file, e.g.
// "go test ./lb -update". It reports through t: Fatal when the file cannot be read or written,
// Error (the lines that differ, by number) when they differ.
func Check(t testing.TB, path string, got []byte, hint string) {
	t.Helper()
	check(t, path, got, *Update, hint)
}

func check(t testing.TB, path string, got []byte, update bool, hint string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run %s to create it)", err, hint)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the output differs from %s (%s rewrites it, after checking the change):\n%s", path, hint, diffLines(string(want), string(got)))
	}
}

// diffLines lists the lines of want and got that differ, by line number ("line 3:\n- want\n+ got\n"
// each); "" when they are equal.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
