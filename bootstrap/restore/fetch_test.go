package restore

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/hactl/hactl/provision"
)

// fetchEnv is the environment a member's fetch runs in here: a HOME of its own (its ~/.curlrc is
// the test's), and PATH (a directory without zstd for the missing-tool case).
type fetchEnv struct{ home, path string }

// runFetch runs fetchScript with /bin/sh here, the way a member runs it: the CA (when given) already
// uploaded next to the snapshot, the curl config (the URL) on stdin. It returns the exit status and
// stderr.
func runFetch(t *testing.T, env fetchEnv, remote, sha, compression string, ca []byte, url string) (int, string) {
	t.Helper()
	for _, tool := range []string{"curl", "zstd", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run a member's fetch here (make host-deps installs it): %v", tool, err)
		}
	}
	if len(ca) > 0 {
		if err := os.MkdirAll(filepath.Dir(remote), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(remote+".ca.pem", ca, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", fetchScript(remote, sha, compression, len(ca) > 0))
	cmd.Env = []string{"HOME=" + env.home, "PATH=" + env.path}
	cmd.Stdin = strings.NewReader(curlConfig(url))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// TestFetchScript runs a member's side of the host fetch against a real HTTP server: a
// zstd-compressed and a plain object land as the raw snapshot with the sha256 checked; another
// sha256, an HTTP error, an unreachable store, a corrupt compressed object and a missing zstd exit
// non-zero with the reason and leave no file (the uploaded CA and a stale .part included); an HTTPS
// store is trusted through the CA file; a ~/.curlrc asking for verbose output is not read.
func TestFetchScript(t *testing.T) {
	raw := make([]byte, 3<<20)
	if _, err := rand.Read(raw[:1<<20]); err != nil { // part random, part zeros: compressible
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	sha := hex.EncodeToString(sum[:])
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	compressed := enc.EncodeAll(raw, nil)
	const sig = "s3cr3t-signature"
	mux := http.NewServeMux()
	mux.HandleFunc("/bucket/snap.db.zst", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("X-Amz-Signature") != sig {
			http.Error(w, "bad signature", http.StatusForbidden)
			return
		}
		w.Write(compressed)
	})
	mux.HandleFunc("/bucket/corrupt.db.zst", func(w http.ResponseWriter, r *http.Request) { w.Write(raw[:4096]) })
	mux.HandleFunc("/bucket/snap.db", func(w http.ResponseWriter, r *http.Request) { w.Write(raw) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	signed := srv.URL + "/bucket/snap.db.zst?X-Amz-Signature=" + sig

	dir := t.TempDir()
	env := fetchEnv{home: filepath.Join(dir, "home"), path: os.Getenv("PATH")}
	if err := os.MkdirAll(env.home, 0o700); err != nil {
		t.Fatal(err)
	}
	// A ~/.curlrc that would print the request (the presigned URL) if curl read it.
	if err := os.WriteFile(filepath.Join(env.home, ".curlrc"), []byte("verbose\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A PATH whose directory has every tool the script uses but zstd.
	noZstd := filepath.Join(dir, "no-zstd-bin")
	if err := os.MkdirAll(noZstd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"curl", "sha256sum", "cut", "cat", "mkdir", "rm", "mv"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(noZstd, tool)); err != nil {
			t.Fatal(err)
		}
	}

	// nothingLeft fails unless dir holds nothing (or only the snapshot, when want is set).
	nothingLeft := func(t *testing.T, remote string, want bool) {
		t.Helper()
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(remote), "*"))
		if want {
			if len(left) != 1 || left[0] != remote {
				t.Errorf("want only %s, found %v", remote, left)
			}
			return
		}
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
	check := func(t *testing.T, remote string) {
		t.Helper()
		got, err := os.ReadFile(remote)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, raw) {
			t.Errorf("%s: %d bytes, not the raw snapshot", remote, len(got))
		}
		if st, err := os.Stat(remote); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", remote, st.Mode().Perm())
		}
		nothingLeft(t, remote, true)
	}
	t.Run("zstd, a stale .part replaced", func(t *testing.T) {
		remote := filepath.Join(dir, "zstd", "restore.db")
		if err := os.MkdirAll(filepath.Dir(remote), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(remote+".part", []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stderr := runFetch(t, env, remote, sha, "zstd", nil, signed)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if strings.Contains(stderr, sig) {
			t.Errorf("the presigned URL is on stderr (~/.curlrc read?): %s", stderr)
		}
		check(t, remote)
	})
	t.Run("none", func(t *testing.T) {
		remote := filepath.Join(dir, "none", "restore.db")
		if code, stderr := runFetch(t, env, remote, sha, "none", nil, srv.URL+"/bucket/snap.db"); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		check(t, remote)
	})
	for _, tc := range []struct {
		name, url, compression, sha, want string
		code                              int
		path                              string
	}{
		{"another sha256", signed, "zstd", strings.Repeat("0", 64), "sha256 is " + sha, 12, ""},
		{"http error", srv.URL + "/bucket/snap.db.zst?X-Amz-Signature=expired", "zstd", sha, "curl exited 22", 11, ""},
		{"http error, plain", srv.URL + "/bucket/missing", "none", sha, "curl exited 22", 11, ""},
		{"unreachable", "http://127.0.0.1:1/bucket/snap.db", "none", sha, "curl exited 7", 11, ""},
		{"corrupt compressed object", srv.URL + "/bucket/corrupt.db.zst", "zstd", sha, "decompressing the snapshot failed", 13, ""},
		{"no zstd", signed, "zstd", sha, "zstd is not installed", 10, noZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"), "restore.db")
			e := env
			if tc.path != "" {
				e.path = tc.path
			}
			// With a CA uploaded: it must be gone after a failure too.
			tls := httptest.NewTLSServer(mux)
			defer tls.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tls.Certificate().Raw})
			code, stderr := runFetch(t, e, remote, tc.sha, tc.compression, ca, tc.url)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, tc.code, tc.want)
			}
			if strings.Contains(stderr, sig) {
				t.Errorf("the presigned URL is on stderr: %s", stderr)
			}
			nothingLeft(t, remote, false)
		})
	}
	t.Run("https with the store's CA", func(t *testing.T) {
		tls := httptest.NewTLSServer(mux)
		defer tls.Close()
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tls.Certificate().Raw})
		remote := filepath.Join(dir, "tls", "restore.db")
		url := tls.URL + "/bucket/snap.db"
		if code, stderr := runFetch(t, env, remote, sha, "none", nil, url); code != 11 || !strings.Contains(stderr, "curl exited 60") {
			t.Errorf("without the CA: exit %d, stderr %q; want curl's certificate error (60)", code, stderr)
		}
		if code, stderr := runFetch(t, env, remote, sha, "none", ca, url); code != 0 {
			t.Fatalf("with the CA: exit %d: %s", code, stderr)
		}
		check(t, remote)
	})
}

// TestCurlConfig: the URL reaches curl's config quoted, its backslashes and double quotes escaped.
func TestCurlConfig(t *testing.T) {
	if got, want := curlConfig(`http://h/b/k?a="x"&b=\y`), `url = "http://h/b/k?a=\"x\"&b=\\y"`+"\n"; got != want {
		t.Errorf("curlConfig = %q, want %q", got, want)
	}
}

// TestFetchErrorHidesURL: a host's output that names the presigned URL is reported without it.
func TestFetchErrorHidesURL(t *testing.T) {
	e := &FetchError{Cmd: &provision.CommandError{Host: "cp-a", ExitCode: 11,
		Stderr: "> GET /b/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=AK%2F&X-Amz-Signature=abc HTTP/1.1\ncurl exited 22"}}
	if got := e.Error(); strings.Contains(got, "X-Amz") || strings.Contains(got, "abc") || !strings.Contains(got, "<presigned URL>") || !strings.Contains(got, "curl exited 22") {
		t.Errorf("FetchError = %q", got)
	}
	var ce *provision.CommandError
	if !errors.As(e, &ce) {
		t.Error("FetchError does not unwrap to the *provision.CommandError")
	}
}
