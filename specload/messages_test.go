package specload

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/internal/golden"
)

// TestMessagesGolden records, for every spec fixture under testdata (invalid-*.yaml, valid-*.yaml,
// and the same under testdata/backup) plus a missing and an endless file, every message loading
// gives: the load error (field path and line of each problem, exit code), the warnings, and for the
// specs that load the local-file, environment (nothing set) and secret-reader checks. The output is
// compared with testdata/invalid-messages.golden byte for byte; -update rewrites it. Absolute paths
// are written as <testdata> and <home>.
func TestMessagesGolden(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pattern := range []string{"testdata/*.yaml", "testdata/backup/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 100 {
		t.Fatalf("only %d fixtures", len(files))
	}
	files = append(files, "testdata/does-not-exist.yaml")
	if _, err := os.Stat("/dev/zero"); err == nil {
		files = append(files, "/dev/zero")
	}
	noEnv := func(string) string { return "" }

	var b strings.Builder
	section := func(name string, err error) {
		if err == nil {
			return
		}
		fmt.Fprintf(&b, "-- %s", name)
		if ec, ok := err.(interface{ ExitCode() int }); ok {
			fmt.Fprintf(&b, " (exit %d)", ec.ExitCode())
		}
		fmt.Fprintf(&b, "\n%v\n", err)
	}
	for _, f := range files {
		fmt.Fprintf(&b, "== %s\n", f)
		c, warns, err := Load(f)
		for _, w := range warns {
			fmt.Fprintf(&b, "-- warning\n%s\n", w)
		}
		section("load", err)
		if err != nil {
			continue
		}
		section("local files", c.ValidationError(f, ValidateLocalFiles(c)))
		section("environment", c.ValidationError(f, ValidateEnvironment(c, noEnv)))
		section("backup files", c.ValidationError(f, ValidateBackupFiles(c)))
		section("backup environment", c.ValidationError(f, ValidateBackupEnvironment(c, noEnv)))
		_, err = ReadVRRPSecret(c, noEnv)
		section("vrrp secret", err)
		if c.Spec.Backup != nil {
			_, err = ReadBackupCredentials(c, noEnv)
			section("backup credentials", err)
			_, err = BackupRecipients(c)
			section("backup recipients", err)
		}
	}
	got := strings.ReplaceAll(strings.ReplaceAll(b.String(), testdata, "<testdata>"), home, "<home>")

	golden.Check(t, filepath.Join("testdata", "invalid-messages.golden"), []byte(got), "go test ./specload -run TestMessagesGolden -update")
}
