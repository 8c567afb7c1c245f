package etcdphases

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

// releaseTarball builds an etcd release tarball whose binaries are shell scripts; etcd reports
// version. dir is the tarball's top-level directory ("" = binaries at the top).
func releaseTarball(t *testing.T, dir, version string, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if dir != "" {
		tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for _, n := range names {
		body := "#!/bin/sh\necho " + n + "\n"
		if n == "etcd" {
			body = "#!/bin/sh\necho 'etcd Version: " + version + "'\necho 'Git SHA: test'\n"
		}
		name := n
		if dir != "" {
			name = dir + "/" + n
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg, Uid: 1234, Gid: 1234}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.WriteHeader(&tar.Header{Name: "README.md", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("hi"))
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// toolPath returns a directory holding symlinks to the named programs only (a PATH without curl or
// wget, say). A program this machine lacks (wget, typically) skips the test, or fails it with
// HACTL_REQUIRE_WGET=1 (make unit sets it, so the wget path cannot silently go untested).
func toolPath(t *testing.T, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			msg := tool + " is not on this machine's PATH: the download script is not run with it"
			if os.Getenv("HACTL_REQUIRE_WGET") == "1" {
				t.Fatal(msg + " (HACTL_REQUIRE_WGET=1)")
			}
			t.Skip(msg)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var baseTools = []string{"sh", "id", "chown", "mkdir", "chmod", "mktemp", "sha256sum", "cut", "tar", "gzip", "sed", "head", "basename", "dirname", "cp", "mv", "rm", "uname", "cat"}

// listFiles lists every file under dir (relative paths), for "nothing changed" checks.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestDownloadScript runs the real install command with the local /bin/sh against an HTTP server:
// the sha256 is checked before anything is extracted or installed, and a success installs the three
// binaries atomically and records the release.
func TestDownloadScript(t *testing.T) {
	good := releaseTarball(t, "etcd-v3.6.16-linux-amd64", "3.6.16", "etcd", "etcdctl", "etcdutl")
	flat := releaseTarball(t, "", "3.6.16", "etcd", "etcdctl", "etcdutl")
	noUtl := releaseTarball(t, "etcd-v3.6.16-linux-amd64", "3.6.16", "etcd", "etcdctl")
	older := releaseTarball(t, "etcd-v3.6.15-linux-amd64", "3.6.15", "etcd", "etcdctl", "etcdutl")
	files := map[string][]byte{"/good.tar.gz": good, "/flat.tar.gz": flat, "/noutl.tar.gz": noUtl, "/older.tar.gz": older}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := files[r.URL.Path]; ok {
			w.Write(b)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name     string
		url, sha string
		tools    []string // PATH: baseTools plus these ("" = the normal PATH)
		wantExit int      // 0 = success
		wantOut  string   // in stdout
		wantErr  string   // in stderr
		corrupt  bool     // send a file whose content differs from its sha256
	}{
		{name: "curl", url: "/good.tar.gz", sha: sha256Hex(good)},
		{name: "binaries at the tarball's top", url: "/flat.tar.gz", sha: sha256Hex(flat)},
		{name: "wget when curl is missing", url: "/good.tar.gz", sha: sha256Hex(good), tools: []string{"wget"}},
		{name: "upper-case sha256 accepted", url: "/good.tar.gz", sha: strings.ToUpper(sha256Hex(good))},
		{name: "wrong sha256: refused before extracting", url: "/good.tar.gz", sha: strings.Repeat("ab", 32),
			wantExit: exitChecksum, wantOut: "sha256=" + sha256Hex(good)},
		{name: "neither curl nor wget", url: "/good.tar.gz", sha: sha256Hex(good), tools: []string{"true"},
			wantExit: exitNoDownloader, wantErr: "neither curl nor wget"},
		{name: "a binary missing from the tarball", url: "/noutl.tar.gz", sha: sha256Hex(noUtl),
			wantExit: exitMissingBinary, wantErr: "holds no etcdutl"},
		{name: "another etcd version", url: "/older.tar.gz", sha: sha256Hex(older),
			wantExit: exitVersionMissing, wantErr: "holds etcd 3.6.15, not 3.6.16"},
		{name: "HTTP 404", url: "/missing.tar.gz", sha: sha256Hex(good), wantExit: 22},
		{name: "a file sent on stdin does not match its sha256", url: "/good.tar.gz", sha: sha256Hex(good), corrupt: true,
			wantExit: exitFileChecksum, wantErr: "FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			// The other files of the host, sent on stdin.
			files := []DesiredFile{
				{Path: filepath.Join(root, "etc/etcd/pki/ca.crt"), Mode: 0o644, Data: []byte("CERT\n")},
				{Path: filepath.Join(root, "etc/etcd/pki/server.key"), Mode: 0o600, Data: []byte("KEY\n")},
				{Path: filepath.Join(root, "etc/systemd/system/etcd.service"), Mode: 0o644, Data: []byte("[Unit]\n")},
			}
			for i := range files {
				files[i].Sum = sha256Hex(files[i].Data)
			}
			stdin, err := filesTar(files)
			if err != nil {
				t.Fatal(err)
			}
			if tc.corrupt {
				files[1].Sum = sha256Hex([]byte("other"))
			}
			p := downloadParams{URL: srv.URL + tc.url, SHA256: tc.sha, Version: "v3.6.16",
				CacheDir: filepath.Join(root, "var/cache/hactl"), BinDir: filepath.Join(root, "usr/local/bin"),
				ReleaseFile: filepath.Join(root, "etc/hactl/etcd-release.sha256"), Files: files}
			// What a killed earlier run left behind: in the cache dir, and a temp file next to a target.
			os.MkdirAll(filepath.Join(p.CacheDir, "etcd-release.0123abcd.d", "etcd-v3.6.16-linux-amd64"), 0o700)
			os.WriteFile(filepath.Join(p.CacheDir, "etcd-release.0123abcd"), []byte("partial"), 0o600)
			if tc.wantExit == 0 {
				stale := filepath.Join(root, "etc/etcd/pki/.ca.crt.hactl-tmp-0011")
				os.MkdirAll(filepath.Dir(stale), 0o755)
				os.WriteFile(stale, nil, 0o600)
				p.Stale = []string{stale}
			}
			cmd := exec.Command("/bin/sh", "-c", downloadScript(p))
			cmd.Stdin = bytes.NewReader(stdin)
			if tc.tools != nil {
				cmd.Env = []string{"PATH=" + toolPath(t, append(baseTools, tc.tools...)...)}
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Run()
			exit := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tc.wantExit || !strings.Contains(stdout.String(), tc.wantOut) || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d, stdout with %q, stderr with %q",
					exit, stdout.String(), stderr.String(), tc.wantExit, tc.wantOut, tc.wantErr)
			}
			if fi, err := os.Stat(p.CacheDir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("cache dir: %v %v, want mode 0700", fi, err)
			}
			if left := listFiles(t, p.CacheDir); len(left) != 0 {
				t.Errorf("temp files left in the cache dir: %v", left)
			}
			if tc.wantExit != 0 {
				if left := append(listFiles(t, filepath.Join(root, "usr")), listFiles(t, filepath.Join(root, "etc"))...); len(left) != 0 {
					t.Errorf("a refused install changed the host: %v", left)
				}
				return
			}
			if left := listFiles(t, p.BinDir); strings.Join(left, " ") != "etcd etcdctl etcdutl" {
				t.Errorf("bin dir holds %v, want exactly the three binaries (no temp files)", left)
			}
			if left := listFiles(t, filepath.Join(root, "etc")); strings.Join(left, " ") != "etcd/pki/ca.crt etcd/pki/server.key hactl/etcd-release.sha256 systemd/system/etcd.service" {
				t.Errorf("/etc holds %v, want the sent files and the release record only", left)
			}
			for _, f := range files {
				fi, err := os.Stat(f.Path)
				content, _ := os.ReadFile(f.Path)
				if err != nil || fi.Mode().Perm() != f.Mode || !bytes.Equal(content, f.Data) {
					t.Errorf("%s: %v mode %v content %q; want mode %v content %q", f.Path, err, fi.Mode(), content, f.Mode, f.Data)
				}
			}
			raw, err := os.ReadFile(p.ReleaseFile)
			if err != nil {
				t.Fatal(err)
			}
			rel := parseRelease(strings.Split(strings.TrimSpace(string(raw)), "\n"))
			if rel.Tarball != strings.ToLower(tc.sha) || len(rel.Binaries) != 3 {
				t.Fatalf("release record %q parsed as %+v", raw, rel)
			}
			for _, n := range etcdBinaryNames {
				bp := filepath.Join(p.BinDir, n)
				fi, err := os.Stat(bp)
				if err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("%s: %v mode %v, want 0755", n, err, fi.Mode())
				}
				content, _ := os.ReadFile(bp)
				if rel.Binaries[bp] != sha256Hex(content) {
					t.Errorf("%s: recorded sum %s, file sum %s", n, rel.Binaries[bp], sha256Hex(content))
				}
			}
		})
	}
}

// TestDownloadFailure: the script's exit codes become typed errors naming host, URL and both sums.
func TestDownloadFailure(t *testing.T) {
	const url = "http://mirror.example/etcd.tar.gz"
	want, got := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name   string
		exit   int
		stdout string
		stderr string
		check  func(t *testing.T, err error)
	}{
		{"checksum", exitChecksum, "sha256=" + got + "\n", "the tarball's sha256 is ...", func(t *testing.T, err error) {
			var ce *DownloadChecksumError
			if !errors.As(err, &ce) || *ce != (DownloadChecksumError{Host: "cp-a", URL: url, Want: want, Got: got}) {
				t.Fatalf("err = %#v", err)
			}
			for _, s := range []string{"cp-a", url, want, got, "nothing was installed"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q lacks %q", err, s)
				}
			}
			// The per-host aggregation names the host once.
			if msg := (&provision.HostError{Host: "cp-a", Err: err}).Error(); strings.Count(msg, "cp-a") != 1 {
				t.Errorf("aggregated: %q", msg)
			}
		}},
		{"no downloader", exitNoDownloader, "", "neither curl nor wget is installed on this host", func(t *testing.T, err error) {
			var de *DownloadError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), "neither curl nor wget") {
				t.Fatalf("err = %v", err)
			}
			var ce *provision.CommandError
			if !errors.As(err, &ce) {
				t.Error("the command error (with stderr) is not wrapped")
			}
		}},
		{"curl failed", 22, "", "curl: (22) The requested URL returned error: 404", func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "exit 22") || !strings.Contains(err.Error(), "404") {
				t.Fatalf("err = %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := &provision.CommandError{Host: "cp-a", Step: "etcd/install", ExitCode: tc.exit, Stderr: tc.stderr}
			tc.check(t, downloadFailure("cp-a", url, strings.ToUpper(want), provision.Result{Stdout: []byte(tc.stdout), ExitCode: tc.exit}, ce))
		})
	}
}

func TestURLArch(t *testing.T) {
	for u, want := range map[string]string{
		"https://github.com/etcd-io/etcd/releases/download/v3.6.16/etcd-v3.6.16-linux-amd64.tar.gz": "x86_64",
		"http://mirror.internal/etcd/etcd-v3.6.16-linux-arm64.tar.gz?x=1":                           "aarch64",
		"http://mirror.internal/etcd.tar.gz":                                                        "",
		"http://mirror.internal/amd64/etcd.tar.gz":                                                  "",
	} {
		if got := provision.URLArch(u); got != want {
			t.Errorf("urlArch(%s) = %q, want %q", u, got, want)
		}
	}
}

// recordingHost accepts every command and refuses uploads.
type recordingHost struct {
	mu   sync.Mutex
	cmds []string
	ups  int
}

func (h *recordingHost) Run(_ context.Context, _, command string, _ ...provision.RunOption) (provision.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, command)
	return provision.Result{Stdout: []byte("installed=3.6.16\n")}, nil
}

func (h *recordingHost) Upload(context.Context, string, []provision.File) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ups++
	return nil
}

func (h *recordingHost) Commands() int { return len(h.cmds) + h.ups }
func (h *recordingHost) Close() error  { return nil }

// TestInstallDownloadIsOneCommand: a host that downloads the release gets it and its other files
// (and the removal of stale temp files) in one command, without a separate upload; a host that
// only needs files still gets an upload.
func TestInstallDownloadIsOneCommand(t *testing.T) {
	f := downloadFixture(t, 3, false)
	f.installed("cp-c")
	f.released("cp-c", strings.Repeat("ab", 32))
	f.b.ledger.facts["cp-c"].Sums[remoteUnit] = "old" // cp-c: the unit only
	f.b.ledger.facts["cp-a"].Stale = []string{"/etc/etcd/pki/.ca.crt.hactl-tmp-0011"}
	if err := (&Plan{f.b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	hosts := map[string]*recordingHost{}
	for _, m := range f.b.members {
		hosts[m.Name] = &recordingHost{}
		f.b.run.SetClient(m.Name, hosts[m.Name])
	}
	if err := (&Install{f.b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cp-a", "cp-b"} {
		h := hosts[n]
		if len(h.cmds) != 1 || h.ups != 0 || !strings.Contains(h.cmds[0], testDownloadURL) {
			t.Errorf("%s: %d commands, %d uploads; want the one install command", n, len(h.cmds), h.ups)
		}
		if n == "cp-a" && !strings.Contains(h.cmds[0], "rm -f -- /etc/etcd/pki/.ca.crt.hactl-tmp-0011") {
			t.Errorf("cp-a: stale temp file not removed by the install command")
		}
		if strings.Contains(h.cmds[0], "PRIVATE KEY") {
			t.Errorf("%s: key material on the command line", n)
		}
	}
	if h := hosts["cp-c"]; len(h.cmds) != 0 || h.ups != 1 {
		t.Errorf("cp-c: %d commands, %d uploads; want one upload", len(h.cmds), h.ups)
	}
}

const testDownloadURL = "http://mirror.internal/etcd/etcd-v3.6.16-linux-amd64.tar.gz"

// downloadFixture is newPlanFixture for a spec installing etcd from spec.etcd.download.
func downloadFixture(t *testing.T, n int, dryRun bool) *planFixture {
	t.Helper()
	stateDir := filepath.Join(t.TempDir(), "state")
	spec := planTestSpec(t, n, stateDir)
	spec.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{}
	spec.Spec.Etcd.Download = &v1alpha1.EtcdDownload{URL: testDownloadURL, SHA256: strings.Repeat("AB", 32)}
	out := &bytes.Buffer{}
	b, err := New(runctx.New(spec, ui.New(out, false, false), dryRun, provision.SpecOptions{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&PKI{b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, m := range b.members {
		b.ledger.facts[m.Name] = &Facts{Data: DataAbsent, Sums: map[string]string{}}
	}
	return &planFixture{t: t, b: b, out: out, stateDir: stateDir}
}

// released makes name a host where the release with tarball sum tarball was installed (binaries
// recorded and present).
func (f *planFixture) released(name, tarball string) {
	r := &Release{Tarball: tarball, Binaries: map[string]string{}}
	for i, bin := range f.b.files.remoteBinaries() {
		s := fmt.Sprintf("%064x", i+1)
		r.Binaries[bin] = s
		f.b.ledger.facts[name].Sums[bin] = s
	}
	f.b.ledger.facts[name].Release = r
}

// TestPlanDownload: with spec.etcd.download the binaries are never uploaded; a host without the
// spec's release (another tarball, a binary missing or changed) downloads it, and on a live
// cluster that is a rolling update.
func TestPlanDownload(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	bin := func(n string) string { return filepath.Join("/usr/local/bin", n) }
	for _, tc := range []struct {
		name     string
		setup    func(f *planFixture)
		want     map[string]wantPlan
		download map[string]bool
	}{{
		name:  "fresh cluster: every host downloads, the other files are uploaded",
		setup: func(f *planFixture) {},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionCreate, Restart: true, upload: nonBinaryPaths()},
			"cp-b": {Action: report.ActionCreate, Restart: true, upload: nonBinaryPaths()},
			"cp-c": {Action: report.ActionCreate, Restart: true, upload: nonBinaryPaths()},
		},
		download: map[string]bool{"cp-a": true, "cp-b": true, "cp-c": true},
	}, {
		name: "same release installed everywhere: unchanged, no download",
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				f.released(n, sha)
			}
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want:     map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		download: map[string]bool{},
	}, {
		name: "another release recorded on one host, a binary missing on another, one changed on the third: rolling update",
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.released("cp-a", strings.Repeat("cd", 32))
			f.released("cp-b", sha)
			delete(f.b.ledger.facts["cp-b"].Sums, bin("etcdutl"))
			f.released("cp-c", sha)
			f.b.ledger.facts["cp-c"].Sums[bin("etcd")] = strings.Repeat("0", 64)
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionUpdate, Restart: true},
			"cp-b": {Action: report.ActionUpdate, Restart: true},
			"cp-c": {Action: report.ActionUpdate, Restart: true},
		},
		download: map[string]bool{"cp-a": true, "cp-b": true, "cp-c": true},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := downloadFixture(t, 3, false)
			tc.setup(f)
			if err := (&Plan{f.b}).Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			for name, w := range tc.want {
				f.check(name, w)
				if got := f.b.ledger.plans[name].Download; got != tc.download[name] {
					t.Errorf("%s: download %v, want %v", name, got, tc.download[name])
				}
				for _, df := range f.b.ledger.plans[name].Upload {
					if df.Local != "" || filepath.Dir(df.Path) == "/usr/local/bin" {
						t.Errorf("%s: a binary is uploaded: %s", name, df.Path)
					}
				}
			}
			want := "download " + testDownloadURL + " (sha256 abababababab…)"
			if got := strings.Contains(f.out.String(), want); got != (len(tc.download) > 0) {
				t.Errorf("printed plan (want %q: %v):\n%s", want, len(tc.download) > 0, f.out)
			}
			// A member of a running cluster's roll gets its release in etcd/start, right before its
			// own restart; the others in etcd/install.
			installs := false
			for name := range tc.download {
				installs = installs || !f.b.rolls(name)
			}
			if got := (&Install{f.b}).ShouldRun(); got != installs {
				t.Errorf("etcd/install runs: %v, want %v", got, installs)
			}
			for _, m := range f.b.Report() {
				if tc.download[m.Name] && !slices.Contains(m.Changes, bin("etcd")) {
					t.Errorf("%s: result changes %v lack the binaries", m.Name, m.Changes)
				}
			}
		})
	}
}

// nonBinaryPaths are the files uploaded to a new member of a download install.
func nonBinaryPaths() []string {
	out := []string{remoteUnit, remoteMarker}
	for _, n := range []string{"ca.crt", "ca.key", "server.crt", "server.key", "peer.crt", "peer.key"} {
		out = append(out, filepath.Join(remotePKIDir, n))
	}
	return out
}
