//go:build e2e

package kubee2e

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testKubeconfigContext is TestKube's kubeconfig-context phase: the commands that take --kubeconfig honour --context against the lab's
// cluster. The kubeconfig is hactl's admin kubeconfig with a second context, "gone", whose server
// nothing listens on, made its current-context (as a user's file with several clusters is):
// `maintenance start/end --context <the lab's>` works through the VIP; --context gone exits 1
// naming context and server, an unknown context exits 1 naming the contexts there are, and the
// Lease drill's dry run reads the cluster through the context given.
func testKubeconfigContext(t *testing.T) {
	suite.BootstrapJSON(t, suite.Lab.SpecPath(3))
	admin := suite.Lab.Kubeconfig() // kubectl's too
	suite.MustHactl(t, "kubeconfig", "-f", suite.Lab.SpecPath(3), "--out", admin)
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	lab := cfg.CurrentContext
	cfg.Clusters["gone"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: cfg.Clusters[cfg.Contexts[lab].Cluster].CertificateAuthorityData}
	cfg.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: cfg.Contexts[lab].AuthInfo}
	cfg.CurrentContext = "gone"
	kc := filepath.Join(t.TempDir(), "two-contexts.conf")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}

	suite.MustHactl(t, "maintenance", "start", "w-c", "--kubeconfig", kc, "--context", lab, "--reason", "e2e context")
	if got := kubectl(t, "get", "node", "w-c", "-o", "jsonpath={.metadata.labels.hactl\\.io/maintenance}"); got != "true" {
		t.Errorf("w-c's maintenance label through --context %s: %q", lab, got)
	}
	suite.MustHactl(t, "maintenance", "end", "w-c", "--kubeconfig", kc, "--context", lab)
	if got := kubectl(t, "get", "node", "w-c", "-o", "jsonpath={.metadata.labels.hactl\\.io/maintenance}"); got != "" {
		t.Errorf("w-c still under maintenance: %q", got)
	}
	lease := []string{"drill", "kill-leader", "--target", "lease/kube-system/kube-scheduler", "--dry-run"}
	// kube-scheduler's holder is a static pod: through a kubeconfig the drill refuses it, after
	// reading the Lease and the holder's node through the context given.
	if r := suite.Hactl(t, append(lease, "--kubeconfig", kc, "--context", lab)...); r.Code == 0 || !strings.Contains(r.Stderr, "is a static pod on node") {
		t.Errorf("Lease drill dry run through --context %s: exit %d, want the static-pod refusal:\n%s", lab, r.Code, r.Stderr)
	}

	for _, args := range [][]string{
		{"maintenance", "start", "w-c"},
		{"scheduler", "status"},
		lease,
	} {
		r := suite.Hactl(t, append(args, "--kubeconfig", kc)...) // the current-context: gone
		if r.Code != 1 || !strings.Contains(r.Stderr, `context "gone"`) || !strings.Contains(r.Stderr, "https://127.0.0.1:1 does not answer") {
			t.Errorf("%v through the current-context gone: exit %d, want 1 naming context and server:\n%s", args, r.Code, r.Stderr)
		}
		r = suite.Hactl(t, append(args, "--kubeconfig", kc, "--context", "nope")...)
		if r.Code != 1 || !strings.Contains(r.Stderr, `context "nope" does not exist; its contexts: "gone", "`+lab+`"`) {
			t.Errorf("%v --context nope: exit %d, want 1 naming the contexts:\n%s", args, r.Code, r.Stderr)
		}
	}
}
