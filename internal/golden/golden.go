// Package golden compares a test's output with a golden file (testdata/...), or rewrites the file
// when the test runs with -update. It is for _test.go files only.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares got with the file at path. With update it writes got there instead (creating the
// directory) and compares nothing. hint is the command that rewrites the file, e.g.
// "go test ./lb -update". It reports through t: Fatal when the file cannot be read or written,
// Error (with got and the file's content) when they differ.
func Check(t testing.TB, path string, got []byte, update bool, hint string) {
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
		t.Errorf("the output differs from %s (%s rewrites it); got:\n%s\nwant:\n%s", path, hint, got, want)
	}
}
