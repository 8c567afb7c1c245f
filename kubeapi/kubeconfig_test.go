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
	if !errors.As(err, &ce) || ce.Context != "nope" || !strings.Contains(err.Error(), `context "nope" does not exist; its contexts: "gone", "lab"`) {
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

func TestLoadKubeconfigBadFiles(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, body, context, want string
		load                      bool // a *LoadError (exit 2), else a *ContextError
	}{
		{"empty file", "", "", "the file defines no context", true},
		{"a context naming a missing cluster", "apiVersion: v1\nkind: Config\ncontexts:\n- name: m\n  context: {cluster: ghost, user: u}\nusers:\n- name: u\n  user: {token: SECRET}\ncurrent-context: m\n", "", `context "m" names cluster "ghost", which the file does not define`, true},
		{"a context naming a missing user", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\ncontexts:\n- name: m\n  context: {cluster: c, user: nobody}\ncurrent-context: m\n", "", `context "m" names user "nobody", which the file does not define`, true},
		{"a current-context naming a missing context", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\ncontexts:\n- name: m\n  context: {cluster: c}\ncurrent-context: ghost\n", "", `its current-context "ghost" does not exist; its contexts: "m"`, false},
	} {
		_, err := LoadKubeconfig(Kubeconfig{Path: write(tc.body), Context: tc.context})
		var le *LoadError
		var ce *ContextError
		if err == nil || !strings.Contains(err.Error(), tc.want) || tc.load != errors.As(err, &le) || !tc.load != errors.As(err, &ce) {
			t.Errorf("%s: %T %v, want %q", tc.name, err, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: a secret in the error: %v", tc.name, err)
		}
	}
}

// A password or a query in the server URL never reaches a message.
func TestServerURLRedacted(t *testing.T) {
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://admin:SECRET-PASS@127.0.0.1:1/?token=SECRET-Q\"}\ncontexts:\n- name: m\n  context: {cluster: c}\ncurrent-context: m\n"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cli, err := LoadKubeconfig(Kubeconfig{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	_, perr := FromKubeconfig(context.Background(), Kubeconfig{Path: p})
	for _, s := range []string{cli.Via, cli.Server, cli.Wrap(errors.New("x")).Error(), perr.Error()} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("a secret in %q", s)
		}
	}
}

// A server that answers the version request with an error is not reported as not answering.
func TestFromKubeconfigRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
	}))
	t.Cleanup(srv.Close)
	_, err := FromKubeconfig(context.Background(), Kubeconfig{Path: writeKubeconfig(t, srv.URL, "lab")})
	var ue *UnreachableError
	if !errors.As(err, &ue) || !ue.Answered || !strings.Contains(err.Error(), "answered the version request with an error") {
		t.Errorf("401: %v", err)
	}
}
