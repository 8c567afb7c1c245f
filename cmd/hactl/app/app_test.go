package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	root := NewRootCommand(Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		fmt.Fprintf(&errb, "ERROR: %v\n", err)
	}
	return out.String(), errb.String(), ExitCode(err)
}

func TestExitCode(t *testing.T) {
	base := errors.New("x")
	cases := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{base, 1},
		{&UsageError{Err: base}, 2},
		{fmt.Errorf("wrapped: %w", &UsageError{Err: base}), 2},
		{&VerdictError{Err: base}, 3},
	}
	for _, c := range cases {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"bootstrap", "extra-arg"},
		{"status", "-o", "yaml"},
		{"nonsense"},
	} {
		_, stderr, code := runCmd(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
	}
}

func TestInitWritesLoadableSpecAndNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cluster.yaml")
	if _, stderr, code := runCmd(t, "init", "-f", p); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(p)
	if err != nil || !bytes.Contains(raw, []byte("apiVersion: hactl.io/v1alpha1")) {
		t.Fatalf("init wrote %q (%v)", raw, err)
	}
	os.WriteFile(p, []byte("mine"), 0o644)
	if _, _, code := runCmd(t, "init", "-f", p); code != 2 {
		t.Fatalf("init over an existing file: exit %d, want 2", code)
	}
	if got, _ := os.ReadFile(p); string(got) != "mine" {
		t.Fatalf("init overwrote the file")
	}
}

func TestInvalidSpecExitsTwoWithFieldPath(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cluster.yaml")
	os.WriteFile(p, []byte("apiVersion: hactl.io/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec:\n  bogus: 1\n"), 0o644)
	for _, cmd := range []string{"plan", "bootstrap", "status"} {
		_, stderr, code := runCmd(t, cmd, "-f", p)
		if code != 2 || !strings.Contains(stderr, "spec.bogus") || !strings.Contains(stderr, ":5:") {
			t.Errorf("%s: exit %d stderr %q; want 2 naming spec.bogus at line 5", cmd, code, stderr)
		}
	}
	_, stderr, code := runCmd(t, "plan", "-f", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 2 {
		t.Errorf("missing spec file: exit %d (%s), want 2", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := runCmd(t, "version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"version"`) {
		t.Fatalf("version -o json: %d %q", code, out)
	}
}
