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
	"time"

	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/pki/check"
)

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	root := NewRootCommand(Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	root.SetArgs(append([]string{"--log-file", filepath.Join(t.TempDir(), "hactl.log")}, args...))
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
		{"status", "-o", "xml"},
		{"nonsense"},
		{"help", "statsu"},
		{"help", "etcd", "member", "rmove"},
		{"plan", "-f", ""},
	} {
		_, stderr, code := runCmd(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
	}
	// help's unknown topic names the nearest command, as the command itself does.
	if _, stderr, _ := runCmd(t, "help", "statsu"); !strings.Contains(stderr, `did you mean "status"`) {
		t.Errorf("help statsu: %q", stderr)
	}
	if _, stderr, code := runCmd(t, ""); code != 2 || strings.Contains(stderr, "did you mean") {
		t.Errorf(`hactl "": exit %d, %q; want 2 without a guess`, code, stderr)
	}
	if out, _, code := runCmd(t, "help", "etcd", "member"); code != 0 || !strings.Contains(out, "replace") {
		t.Errorf("help etcd member: exit %d\n%s", code, out)
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
	if code != 0 || !strings.Contains(out, `"version"`) || !strings.Contains(out, `"commit"`) || !strings.Contains(out, `"date"`) {
		t.Fatalf("version -o json: %d %q", code, out)
	}
}

// TestMoreUsageErrorsExitTwo: bad values of every command's flags and the completion command's
// arguments are usage errors, found before the spec is read or any host contacted.
func TestMoreUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version", "-o", "xml"}, `--output "xml": must be table, json or yaml`},
		{[]string{"plan", "--wait", "2m"}, "unknown flag: --wait"},
		{[]string{"bootstrap", "--wait=-1s"}, "--wait -1s: must be a positive duration"},
		{[]string{"plan", "--skip-phases", "preflight"}, `phase "preflight" can't be skipped`},
		{[]string{"bootstrap", "--skip-phases", "etcd/wait,pki"}, `phase "pki" can't be skipped`},
		{[]string{"bootstrap", "--skip-phases", "plan"}, `phase "plan" can't be skipped`},
		{[]string{"completion", "bash", "extra"}, `unknown command "extra"`},
		{[]string{"completion", "nosuchshell"}, `unknown command "nosuchshell"`},
		{[]string{"etcd", "member", "remove"}, "requires at least 1 arg(s)"},
		{[]string{"etcd", "member", "remove", "etcd-d", "etcd-d"}, "etcd-d is named twice"},
		{[]string{"etcd", "member", "remove", "cp-a", "-o", "xml"}, `--output "xml"`},
		{[]string{"etcd", "member", "remove", " "}, "NAME: the member's name"},
		{[]string{"etcd", "defrag", "--min-fragmentation", "120"}, "--min-fragmentation 120: a percentage"},
		{[]string{"etcd", "defrag", "--min-fragmentation", "-1"}, "--min-fragmentation -1"},
		{[]string{"etcd", "compact", "--retain", "-5"}, "--retain -5"},
		{[]string{"etcd", "compact", "--yes"}, "--retain N is required"},
		{[]string{"etcd", "alarm", "disarm", "--retain", "-1"}, "--retain -1"},
		{[]string{"etcd", "alarm", "list", "extra"}, "unknown command"},
		{[]string{"statsu"}, `unknown command "statsu" for "hactl"; did you mean "status"?`},
		{[]string{"backup", "nwo"}, `did you mean "now"?`},
		{[]string{"etcd", "member", "rmove", "cp-a"}, `unknown command "rmove" for "hactl etcd member"; did you mean "remove"?`},
		{[]string{"drill", "kill-leadr"}, `did you mean "kill-leader"?`},
		{[]string{"explain", "spec.etcd.versoin"}, `has no field "versoin"; did you mean spec.etcd.version?`},
		{[]string{"explain", "spec", "extra"}, "accepts at most 1 arg(s)"},
		{[]string{"explain", "spec", "-o", "xml"}, `--output "xml"`},
		{[]string{"schema", "extra"}, "unknown command"},
	} {
		_, stderr, code := runCmd(t, append(tc.args, "-f", filepath.Join(t.TempDir(), "none.yaml"))...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q; want 2 saying %q", tc.args, code, stderr, tc.want)
		}
	}
	if out, _, code := runCmd(t, "schema"); code != 0 || !strings.Contains(out, `"$id": "https://hactl.io/schemas/v1alpha1/cluster.schema.json"`) {
		t.Errorf("schema: exit %d", code)
	}
	if out, _, code := runCmd(t, "explain", "spec.etcd", "-o", "yaml"); code != 0 || !strings.Contains(out, "path: spec.etcd.dataDir") {
		t.Errorf("explain spec.etcd -o yaml: exit %d\n%s", code, out)
	}
	if out, _, code := runCmd(t, "completion", "bash"); code != 0 || !strings.Contains(out, "bash completion") {
		t.Errorf("completion bash: exit %d", code)
	}
}

func TestInitOntoDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-f", dir}, {"init", "-f", dir, "--force"}} {
		_, stderr, code := runCmd(t, args...)
		if code != 2 || !strings.Contains(stderr, "is a directory") {
			t.Errorf("%v: exit %d stderr %q; want 2 saying it is a directory", args, code, stderr)
		}
	}
}

func TestPKICheckUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pki", "check", "-o", "xml"}, `--output "xml"`},
		{[]string{"pki", "check", "extra"}, "unknown command"},
		{[]string{"pki", "nosuch"}, "unknown command"},
	} {
		_, stderr, code := runCmd(t, append(tc.args, "-f", filepath.Join(t.TempDir(), "none.yaml"))...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q; want 2 saying %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestPrintPKIReport(t *testing.T) {
	now := time.Now().UTC()
	cert := func(path, subject string, days int, signed bool, problems ...string) check.CertCheck {
		return check.CertCheck{CertInfo: pki.CertInfo{Path: path, Subject: subject, DNSNames: []string{"cp-a"}, IPAddresses: []string{"10.0.0.1"},
			NotAfter: now.Add(time.Duration(days) * 24 * time.Hour)}, DaysLeft: days, SignedByCA: signed, Problems: problems}
	}
	rep := &check.Report{
		Cluster: "prod", WarnDays: 30,
		CA: check.CertCheck{CertInfo: pki.CertInfo{Subject: "CN=etcd-ca", NotAfter: now}, Fingerprint: "SHA256:abcd"},
		Hosts: []check.HostCerts{
			{Host: "cp-a", Certificates: []check.CertCheck{cert("/etc/etcd/pki/server.crt", "CN=cp-a", 12, true, "expires in 12 days")}},
			{Host: "cp-b", Error: "host cp-b: connect: connection refused"},
		},
		Local:    []check.CertCheck{cert("ca.crt", "CN=etcd-ca", 3650, true)},
		Problems: []string{"cp-a:/etc/etcd/pki/server.crt: expires in 12 days"},
	}
	var b bytes.Buffer
	printPKIReport(&b, rep)
	out := b.String()
	for _, s := range []string{"CA CN=etcd-ca SHA256:abcd", "cp-a   /etc/etcd/pki/server.crt  CN=cp-a ", "DNS:cp-a,IP:10.0.0.1", "12d", "UNREACHABLE",
		"cp-b: host cp-b: connect: connection refused", "local  ca.crt   ", "PROBLEMS:\n  cp-a:/etc/etcd/pki/server.crt: expires in 12 days"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestUnsetSecretEnvExitsTwo: a spec naming an unset environment variable for the sudo password is
// refused before any host is contacted, naming the field and the variable (never a value).
func TestUnsetSecretEnvExitsTwo(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cluster.yaml")
	if _, stderr, code := runCmd(t, "init", "-f", p); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	raw, _ := os.ReadFile(p)
	spec := strings.Replace(string(raw), `passwordEnv: ""`, `passwordEnv: HACTL_TEST_UNSET_SUDO_PW`, 1)
	if spec == string(raw) {
		t.Fatal("example spec has no sudo.passwordEnv to set")
	}
	os.WriteFile(p, []byte(spec), 0o644)
	t.Setenv("HACTL_TEST_UNSET_SUDO_PW", "")
	_, stderr, code := runCmd(t, "pki", "check", "-f", p)
	if code != 2 || !strings.Contains(stderr, "spec.ssh.sudo.passwordEnv") || !strings.Contains(stderr, "HACTL_TEST_UNSET_SUDO_PW") {
		t.Errorf("pki check: exit %d stderr %q; want 2 naming spec.ssh.sudo.passwordEnv", code, stderr)
	}
}

// TestGivenValuesNeverDefaulted: a value given on the command line that the library below reads
// as "unset, use the default" is refused (exit 2, the flag and the rule) before the spec is read or
// a host contacted, never silently replaced (issue 37 item 3).
func TestGivenValuesNeverDefaulted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"operator", "deploy", "--replicas", "0"}, "--replicas: 0: between 1 and 5 (one holds the Lease, the others wait)"},
		{[]string{"operator", "deploy", "--replicas", "6"}, "--replicas: 6: between 1 and 5"},
		{[]string{"operator", "deploy", "--keep-last", "0"}, "--keep-last 0: the retention policy keeps no snapshot"},
		{[]string{"operator", "deploy", "--keep-hourly", "0", "--keep-daily", "0"}, "--keep-hourly 0 --keep-daily 0: the retention policy keeps no snapshot"},
		{[]string{"operator", "deploy", "--backup-every", "0s"}, "--backup-every: --every 0s: must be a positive interval"},
		{[]string{"operator", "deploy", "--grace-period", "0s"}, "--grace-period: 0s: a positive duration"},
		{[]string{"operator", "deploy", "--namespace", ""}, `--namespace "": an empty value; give one, or leave the flag out for the default, hactl-system`},
		{[]string{"operator", "remove", "--namespace", ""}, `--namespace "": an empty value`},
		{[]string{"drill", "kill-leader", "--max-rto", "0s"}, "--max-rto 0s: must be a positive duration"},
		{[]string{"drill", "kill-leader", "--target", "lease/kube-system/hactl-scheduler", "--max-rto", "0s"}, "--max-rto 0s: must be a positive duration"},
		{[]string{"etcd", "member", "replace", "cp-c", "--with", "cp-d", "--wait", "0s"}, "--wait 0s: must be a positive duration"},
		{[]string{"scheduler", "deploy", "--wait", "0s"}, "--wait 0s: must be a positive duration"},
		{[]string{"backup", "agent", "--member", "cp-a", "--timeout", "0s"}, "--timeout 0s: must be a positive duration"},
		{[]string{"kubeconfig", "--expiry", "90m500ms"}, "--expiry 1h30m0.5s: whole seconds"},
		{[]string{"kubeconfig", "--user", ""}, `--user "": an empty value; give one, or leave the flag out for its default, as hactl kubeconfig --help says`},
		{[]string{"kubeconfig", "--group", ""}, `--group "": an empty value`},
		{[]string{"kubeadm-config", "--pod-subnet", ""}, `--pod-subnet "": an empty value; give one, or leave the flag out for the default, 10.244.0.0/16`},
		{[]string{"scheduler", "deploy", "--image", ""}, `--image "": an empty value`},
		{[]string{"operator", "deploy", "--kubeconfig", ""}, `--kubeconfig "": an empty value`},
		{[]string{"backup", "verify", "--identity-file", ""}, `--identity-file "": an empty value`},
		{[]string{"drill", "lb-failover", "--ca-file", ""}, `--ca-file "": an empty value`},
	} {
		_, stderr, code := runCmd(t, append(tc.args, "-f", filepath.Join(t.TempDir(), "none.yaml"))...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q; want 2 saying %q", tc.args, code, stderr, tc.want)
		}
	}
	// A 0 beside a rule of 1 or more means what it says (that rule keeps none): not refused here,
	// so the run goes on to read the (missing) spec.
	if _, stderr, _ := runCmd(t, "operator", "deploy", "--keep-last", "0", "--keep-daily", "7", "-f", filepath.Join(t.TempDir(), "none.yaml")); strings.Contains(stderr, "keeps no snapshot") {
		t.Errorf("--keep-last 0 --keep-daily 7 refused: %q", stderr)
	}
}
