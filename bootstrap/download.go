package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// Remote files of a download install (spec.etcd.download).
const (
	// remoteRelease records the installed release: "<tarball sha256>  <tarball file name>" then one
	// "<sha256>  <path>" line per installed binary (sha256sum's format). Preflight reads it: the same
	// tarball with the same binaries in place means nothing to download.
	remoteRelease = "/etc/hactl/etcd-release.sha256"
	// remoteCacheDir holds the tarball and its extraction while an install runs (created 0700;
	// emptied again by the install command, whatever its outcome).
	remoteCacheDir = "/var/cache/hactl"
)

// etcdBinaryNames are the programs of an etcd release tarball, all installed to etcd.RemoteBinDir.
var etcdBinaryNames = []string{"etcd", "etcdctl", "etcdutl"}

// Release is the parsed remoteRelease of a host.
type Release struct {
	// Tarball is the sha256 of the tarball the binaries came from.
	Tarball string
	// Binaries maps each installed binary's path to its sha256 at install time.
	Binaries map[string]string
}

// parseRelease reads remoteRelease's lines: the first names the tarball, the others the binaries.
func parseRelease(lines []string) *Release {
	r := &Release{Binaries: map[string]string{}}
	for i, l := range lines {
		sum, name, ok := strings.Cut(l, "  ")
		if !ok || !isSHA256(sum) {
			continue
		}
		if i == 0 {
			r.Tarball = sum
			continue
		}
		r.Binaries[name] = sum
	}
	return r
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// downloadInstall reports whether the etcd binaries come from spec.etcd.download.
func (b *Bootstrapper) downloadInstall() bool { return b.spec.Spec.Etcd.Download != nil }

// needsDownload reports whether host facts f lack the spec's release: another (or no) tarball
// recorded, or an installed binary missing or different from what the tarball installed.
func (b *Bootstrapper) needsDownload(f *Facts) bool {
	d := b.spec.Spec.Etcd.Download
	if d == nil {
		return false
	}
	if f.Release == nil || f.Release.Tarball != strings.ToLower(d.SHA256) {
		return true
	}
	for _, n := range etcdBinaryNames {
		p := path.Join(etcd.RemoteBinDir, n)
		if f.Sums[p] == "" || f.Sums[p] != f.Release.Binaries[p] {
			return true
		}
	}
	return false
}

// shortSum is the first 12 hex digits of a sha256, for the plan.
func shortSum(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// goArchToUname maps the architecture names of etcd release tarballs (etcd-<v>-linux-<goarch>) to
// `uname -m`.
var goArchToUname = map[string]string{
	"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64",
}

// urlArch returns the `uname -m` architecture a tarball URL names in its file name
// ("etcd-v3.6.16-linux-arm64.tar.gz" → "aarch64"), or "" when it names none.
func urlArch(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	base := path.Base(u.Path)
	for goarch, uname := range goArchToUname {
		if strings.Contains(base, "-"+goarch+".") || strings.Contains(base, "-"+goarch+"-") || strings.Contains(base, "_"+goarch+".") {
			return uname
		}
	}
	return ""
}

// Exit codes of the download script for the failures it reports itself (anything else is a
// command failure reported as is: curl/wget's error, tar's, ...).
const (
	exitNoDownloader   = 90
	exitChecksum       = 91
	exitMissingBinary  = 92
	exitCannotRun      = 93
	exitVersionMissing = 94
)

// downloadParams are the inputs of downloadScript; the paths are parameters so tests run the script
// in a temp dir.
type downloadParams struct {
	URL, SHA256, Version          string
	CacheDir, BinDir, ReleaseFile string
}

// downloadScript returns the one command that installs the etcd binaries from the release tarball
// on a host:
//
//  1. remove what a killed earlier run left in CacheDir (its own etcd-release.* names only), fetch
//     the URL with curl (or wget when curl is missing; neither → exit 90) into a temp file
//     in CacheDir (created 0700);
//  2. check the tarball's sha256 BEFORE anything else (mismatch → print "sha256=<actual>", exit 91):
//     nothing outside CacheDir has been touched and the temp file is removed;
//  3. extract into a temp dir, find etcd, etcdctl and etcdutl (at the top or in the one directory of
//     the tarball; missing → exit 92), run "etcd --version" (cannot run: wrong architecture → exit
//     93; another version than spec.etcd.version → exit 94);
//  4. copy each binary to a temp name in BinDir (".<name>.hactl-tmp-*", which preflight reports and
//     etcd/install removes if a run is killed), chmod 0755, then mv each into place (atomic per
//     file), and write ReleaseFile the same way.
//
// A trap removes the temp files and dir on every exit.
func downloadScript(p downloadParams) string {
	q := provision.ShellQuote
	version := strings.TrimPrefix(p.Version, "v")
	return fmt.Sprintf(`set -eu
url=%s; want=%s; cache=%s; bin=%s; rel=%s; version=%s
tgz=""; dir=""; tmps=""
cleanup() { rm -f "$tgz" $tmps; if [ -n "$dir" ]; then rm -rf "$dir"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p -m 0700 "$cache" && chmod 0700 "$cache"
rm -rf "$cache"/etcd-release.*
tgz=$(mktemp "$cache/etcd-release.XXXXXXXX")
if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 2 --connect-timeout 20 -o "$tgz" "$url"
elif command -v wget >/dev/null 2>&1; then wget -q -T 20 -t 3 -O "$tgz" "$url"
else echo "neither curl nor wget is installed on this host: install one of them (e.g. apt-get install curl) or use spec.etcd.binaries" >&2; exit %d; fi
got=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then echo "sha256=$got"; echo "the tarball's sha256 is $got, not $want" >&2; exit %d; fi
dir=$(mktemp -d "$cache/etcd-release.XXXXXXXX.d")
tar -xzf "$tgz" -C "$dir" --no-same-owner
src=""
for d in "$dir" "$dir"/*; do if [ -f "$d/etcd" ]; then src=$d; break; fi; done
missing=""
for b in %[9]s; do if [ -z "$src" ] || [ ! -f "$src/$b" ]; then missing="$missing $b"; fi; done
if [ -n "$missing" ]; then echo "the tarball holds no$missing (looked at its top and in its directories)" >&2; exit %d; fi
if ! out=$("$src/etcd" --version 2>&1); then echo "cannot run etcd from the tarball on this $(uname -m) host (wrong architecture?): $(echo "$out" | head -n1)" >&2; exit %d; fi
have=$(echo "$out" | sed -n 's/^etcd Version: //p')
if [ "$have" != "$version" ]; then echo "the tarball holds etcd ${have:-of unknown version}, not $version (spec.etcd.version)" >&2; exit %d; fi
mkdir -p "$bin" "$(dirname "$rel")"
record="$want  $(basename "$url")"
for b in %[9]s; do
  t=$(mktemp "$bin/.$b.hactl-tmp-XXXXXXXXXXXXXXXX"); tmps="$tmps $t"
  cp "$src/$b" "$t"; chmod 0755 "$t"
  record="$record
$(sha256sum "$t" | cut -d' ' -f1)  $bin/$b"
done
rt=$(mktemp "$(dirname "$rel")/.$(basename "$rel").hactl-tmp-XXXXXXXXXXXXXXXX"); tmps="$tmps $rt"
printf '%%s\n' "$record" > "$rt"; chmod 0644 "$rt"
for t in $tmps; do
  if [ "$t" = "$rt" ]; then continue; fi
  b=$(basename "$t"); b=${b#.}; b=${b%%%%.hactl-tmp-*}
  mv -f "$t" "$bin/$b"
done
mv -f "$rt" "$rel"
tmps=""
echo "installed=$have"
`, q(p.URL), q(strings.ToLower(p.SHA256)), q(p.CacheDir), q(p.BinDir), q(p.ReleaseFile), q(version),
		exitNoDownloader, exitChecksum, strings.Join(etcdBinaryNames, " "),
		exitMissingBinary, exitCannotRun, exitVersionMissing)
}

// DownloadChecksumError refuses a tarball whose sha256 is not spec.etcd.download.sha256. It is found
// before anything is extracted or installed: the host is left as it was (the downloaded temp file
// is removed).
type DownloadChecksumError struct {
	Host, URL, Want, Got string
}

func (e *DownloadChecksumError) Error() string {
	return fmt.Sprintf("%s: the etcd tarball %s has sha256 %s, but spec.etcd.download.sha256 is %s: nothing was installed. "+
		"Check the URL (a mirror serving another file?) and the checksum the release publishes", e.Host, e.URL, e.Got, e.Want)
}

// DownloadError is any other failure of a download install that the install command diagnosed
// itself (no curl or wget, binaries missing from the tarball, wrong architecture or version). Err is
// the *provision.CommandError carrying the command's stderr.
type DownloadError struct {
	Host, URL, Reason string
	Err               error
}

func (e *DownloadError) Error() string {
	return fmt.Sprintf("%s: installing etcd from %s: %s; nothing was installed", e.Host, e.URL, e.Reason)
}

func (e *DownloadError) Unwrap() error { return e.Err }

// download runs downloadScript on m and maps its failures to typed errors.
func (b *Bootstrapper) download(ctx context.Context, m member) error {
	d := b.spec.Spec.Etcd.Download
	sctx, cancel := b.stepCtx(ctx)
	defer cancel()
	res, err := b.run(sctx, m.Name, "etcd/install", downloadScript(downloadParams{
		URL: d.URL, SHA256: d.SHA256, Version: b.spec.Spec.Etcd.Version,
		CacheDir: remoteCacheDir, BinDir: etcd.RemoteBinDir, ReleaseFile: remoteRelease,
	}))
	if err != nil {
		return downloadFailure(m.Name, d.URL, d.SHA256, res, err)
	}
	b.p.Hostf(m.Name, "installed etcd %s from %s (sha256 %s verified)", b.spec.Spec.Etcd.Version, d.URL, shortSum(strings.ToLower(d.SHA256)))
	return nil
}

// downloadFailure turns the download command's failure into a typed error.
func downloadFailure(host, rawURL, want string, res provision.Result, err error) error {
	var ce *provision.CommandError
	if !errors.As(err, &ce) {
		return err
	}
	stderr := strings.TrimSpace(ce.Stderr)
	switch ce.ExitCode {
	case exitChecksum:
		got := "unknown"
		for _, l := range strings.Split(string(res.Stdout), "\n") {
			if v, ok := strings.CutPrefix(l, "sha256="); ok {
				got = strings.TrimSpace(v)
			}
		}
		return &DownloadChecksumError{Host: host, URL: rawURL, Want: strings.ToLower(want), Got: got}
	case exitNoDownloader, exitMissingBinary, exitCannotRun, exitVersionMissing:
		return &DownloadError{Host: host, URL: rawURL, Reason: lastLine(stderr), Err: err}
	}
	return &DownloadError{Host: host, URL: rawURL, Reason: "the download command failed (exit " + fmt.Sprint(ce.ExitCode) + "): " + orDash(lastLine(stderr)), Err: err}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
