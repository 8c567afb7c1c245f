package restore

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// runFetch runs fetchScript with /bin/sh here, the way a member runs it: the curl config (the URL)
// on stdin. It returns the exit status and stderr.
func runFetch(t *testing.T, remote, sha, compression string, ca []byte, url string) (int, string) {
	t.Helper()
	for _, tool := range []string{"curl", "zstd", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run a member's fetch here (make host-deps installs it): %v", tool, err)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", fetchScript(remote, sha, compression, ca))
	cmd.Stdin = strings.NewReader(curlConfig(url))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// TestFetchScript runs a member's side of the host fetch against a real HTTP server: a
// zstd-compressed and a plain object land as the raw snapshot with the sha256 checked; another
// sha256, an HTTP error and an unreachable store exit non-zero with the reason and leave no file;
// an HTTPS store is trusted through the CA bundle written next to the snapshot.
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
	mux := http.NewServeMux()
	mux.HandleFunc("/bucket/snap.db.zst", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("X-Amz-Signature") != `s"ig\n` {
			http.Error(w, "bad signature", http.StatusForbidden)
			return
		}
		w.Write(compressed)
	})
	mux.HandleFunc("/bucket/snap.db", func(w http.ResponseWriter, r *http.Request) { w.Write(raw) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	signed := srv.URL + "/bucket/snap.db.zst?X-Amz-Signature=" + strings.NewReplacer(`"`, "%22", `\`, "%5C").Replace(`s"ig\n`)

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
		left, _ := filepath.Glob(remote + ".*")
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
	dir := t.TempDir()
	t.Run("zstd", func(t *testing.T) {
		remote := filepath.Join(dir, "zstd", "restore.db")
		if code, stderr := runFetch(t, remote, sha, "zstd", nil, signed); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		check(t, remote)
	})
	t.Run("none", func(t *testing.T) {
		remote := filepath.Join(dir, "none", "restore.db")
		if code, stderr := runFetch(t, remote, sha, "none", nil, srv.URL+"/bucket/snap.db"); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		check(t, remote)
	})
	for _, tc := range []struct {
		name, url, compression, sha, want string
		code                              int
	}{
		{"another sha256", signed, "zstd", strings.Repeat("0", 64), "sha256 is " + sha, 12},
		{"http error", srv.URL + "/bucket/snap.db.zst?X-Amz-Signature=expired", "zstd", sha, "curl exited 22", 11},
		{"http error, plain", srv.URL + "/bucket/missing", "none", sha, "curl exited 22", 11},
		{"unreachable", "http://127.0.0.1:1/bucket/snap.db", "none", sha, "curl exited 7", 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"), "restore.db")
			code, stderr := runFetch(t, remote, tc.sha, tc.compression, nil, tc.url)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, tc.code, tc.want)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(remote), "*")); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
	t.Run("https with the store's CA", func(t *testing.T) {
		tls := httptest.NewTLSServer(mux)
		defer tls.Close()
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tls.Certificate().Raw})
		remote := filepath.Join(dir, "tls", "restore.db")
		url := tls.URL + "/bucket/snap.db"
		if code, stderr := runFetch(t, remote, sha, "none", nil, url); code != 11 || !strings.Contains(stderr, "curl exited 60") {
			t.Errorf("without the CA: exit %d, stderr %q; want curl's certificate error (60)", code, stderr)
		}
		if code, stderr := runFetch(t, remote, sha, "none", ca, url); code != 0 {
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
