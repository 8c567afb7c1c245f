package schedule

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/internal/testcert"
)

func TestCertificatesTextfile(t *testing.T) {
	dir := t.TempDir()
	etcdPKI, kubePKI := filepath.Join(dir, "etcd", "pki"), filepath.Join(dir, "kubernetes", "pki")
	if err := os.MkdirAll(filepath.Join(kubePKI, "etcd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(etcdPKI, 0o755); err != nil {
		t.Fatal(err)
	}
	testcert.WriteCA(t, filepath.Join(etcdPKI, "ca.crt"))
	testcert.WriteLeaf(t, filepath.Join(etcdPKI, "server.crt"))
	testcert.WriteLeaf(t, filepath.Join(kubePKI, "etcd", "ca.crt")) // nested
	if err := os.WriteFile(filepath.Join(kubePKI, "broken.crt"), []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etcdPKI, "server.key"), []byte("ignored"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "textfile", CertificatesTextfile)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteCertificatesTextfile(out, "lab", "cp-a", []string{etcdPKI, kubePKI, filepath.Join(dir, "missing")})
	if err == nil || !strings.Contains(err.Error(), "broken.crt") {
		t.Fatalf("error %v, want one naming broken.crt", err)
	}
	b, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	text := string(b)
	if n := strings.Count(text, MetricCertificateExpiry+"{"); n != 3 {
		t.Fatalf("%d samples, want 3 (ca, server, nested etcd/ca):\n%s", n, text)
	}
	for _, want := range []string{`cluster="lab"`, `member="cp-a"`, `path="` + filepath.Join(etcdPKI, "server.crt") + `"`, "# TYPE " + MetricCertificateExpiry + " gauge"} {
		if !strings.Contains(text, want) {
			t.Errorf("textfile lacks %s:\n%s", want, text)
		}
	}
	certs, _ := ScanCertificates([]string{etcdPKI})
	if len(certs) != 2 || certs[0].NotAfter.IsZero() || certs[1].Subject == "" {
		t.Errorf("scan: %+v", certs)
	}
	// node_exporter reads what promtool accepts.
	promtool, perr := exec.LookPath("promtool")
	if perr != nil {
		if os.Getenv("HACTL_REQUIRE_PROMTOOL") == "1" {
			t.Fatalf("promtool: %v (HACTL_REQUIRE_PROMTOOL=1; make unit installs it)", perr)
		}
		t.Log("promtool not installed: the textfile's lint is not run")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(b)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, o)
	}
}
