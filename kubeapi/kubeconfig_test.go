package kubeapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKubeconfig writes a kubeconfig with the contexts "lab" (server up) and "gone" (server down:
// a port nothing listens on), current-context current, and returns its path.
func writeKubeconfig(t *testing.T, up, current string) string {
	t.Helper()
	kc := `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: ` + up + `}
- name: gone
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: lab
  context: {cluster: lab, user: u}
- name: gone
  context: {cluster: gone, user: u}
current-context: "` + current + `"
`
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func versionServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"major":"1","minor":"33","gitVersion":"v1.33.4"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLoadKubeconfigContexts(t *testing.T) {
	srv := versionServer(t)
	path := writeKubeconfig(t, srv.URL, "lab")

	cli, err := LoadKubeconfig(Kubeconfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if cli.Context != "lab" || cli.Server != srv.URL || !strings.Contains(cli.Via, `context "lab"`) || !strings.Contains(cli.Via, srv.URL) {
		t.Errorf("current context: context %q server %q via %q", cli.Context, cli.Server, cli.Via)
	}
	cli, err = LoadKubeconfig(Kubeconfig{Path: path, Context: "gone"})
	if err != nil || cli.Context != "gone" || cli.Server != "http://127.0.0.1:1" {
		t.Errorf("--context gone: %v, %+v", err, cli)
	}
	got := cli.Wrap(errors.New("boom"))
	if !strings.Contains(got.Error(), `context "gone"`) || !strings.Contains(got.Error(), "http://127.0.0.1:1") || cli.Wrap(nil) != nil {
		t.Errorf("Wrap: %v", got)
	}

	_, err = LoadKubeconfig(Kubeconfig{Path: path, Context: "nope"})
	var ce *ContextError
	if !errors.As(err, &ce) || ce.Context != "nope" || !strings.Contains(err.Error(), `context "nope" does not exist; its contexts: gone, lab`) {
		t.Errorf("unknown context: %v", err)
	}
	_, err = LoadKubeconfig(Kubeconfig{Path: writeKubeconfig(t, srv.URL, "")})
	if !errors.As(err, &ce) || ce.Context != "" || !strings.Contains(err.Error(), "no current-context") {
		t.Errorf("no current-context: %v", err)
	}
	_, err = LoadKubeconfig(Kubeconfig{Path: filepath.Join(t.TempDir(), "missing")})
	var le *LoadError
	if !errors.As(err, &le) {
		t.Errorf("missing file: %T %v", err, err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("clusters: [this is not"), 0o600)
	if _, err := LoadKubeconfig(Kubeconfig{Path: bad}); !errors.As(err, &le) {
		t.Errorf("unparsable file: %T %v", err, err)
	}
}

func TestFromKubeconfigPings(t *testing.T) {
	srv := versionServer(t)
	path := writeKubeconfig(t, srv.URL, "lab")
	ctx := context.Background()
	if _, err := FromKubeconfig(ctx, Kubeconfig{Path: path}); err != nil {
		t.Errorf("server that answers: %v", err)
	}
	_, err := FromKubeconfig(ctx, Kubeconfig{Path: path, Context: "gone"})
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.Context != "gone" || ue.Server != "http://127.0.0.1:1" ||
		!strings.Contains(err.Error(), `context "gone"`) || !strings.Contains(err.Error(), "http://127.0.0.1:1 does not answer") {
		t.Errorf("server that does not answer: %v", err)
	}
}
