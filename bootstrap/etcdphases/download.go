package etcdphases

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
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
		if !ok || !provision.IsSHA256(sum) {
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

// needsDownload reports whether host facts f lack the spec's release: another (or no) tarball
// recorded, or an installed binary missing or different from what the tarball installed.
func (fs *fileSet) needsDownload(f *Facts) bool {
	d := fs.spec.Spec.Etcd.Download
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

// ShortSum is the first 12 hex digits of a sha256, for the plan.
func ShortSum(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// Exit codes of the download script for the failures it reports itself (anything else is a
// command failure reported as is: curl/wget's error, tar's, ...).
const (
	exitNoDownloader   = 90
	exitChecksum       = 91
	exitMissingBinary  = 92
	exitCannotRun      = 93
	exitVersionMissing = 94
	exitFileChecksum   = 95
)

// downloadParams are the inputs of downloadScript; the paths are parameters so tests run the script
// in a temp dir.
type downloadParams struct {
	URL, SHA256, Version          string
	CacheDir, BinDir, ReleaseFile string
	// Files are the other files the host gets in the same command (certificates, keys, unit,
	// marker: the plan's uploads), sent as a tar archive on the command's standard input (see
	// filesTar), never on its command line. Each must have Sum set.
	Files []DesiredFile
	// Stale are temp files of interrupted earlier runs to remove.
	Stale []string
}

// downloadScript returns the one command that installs etcd from the release tarball on a host,
// together with the host's other changed files:
//
//  1. remove what a killed earlier run left in CacheDir (its own etcd-release.* names) and the
//     stale temp files preflight found; fetch the URL with curl (or wget when curl is missing;
//     neither → exit 90) into a temp file in CacheDir (created 0700);
//  2. check the tarball's sha256 BEFORE anything else (mismatch → print "sha256=<actual>", exit 91):
//     nothing outside CacheDir has been touched and the temp file is removed;
//  3. extract into a temp dir, find etcd, etcdctl and etcdutl (at the top or in a directory of the
//     tarball; missing → exit 92), run "etcd --version" (cannot run: wrong architecture → exit 93;
//     another version than spec.etcd.version → exit 94);
//  4. read the other files from standard input (a tar archive) into a temp dir and check each
//     one's sha256 (mismatch → exit 95);
//  5. copy every binary and file to a temp name in its target directory (".<name>.hactl-tmp-*",
//     which preflight reports and the next run removes if this one is killed), set owner root and
//     mode, then mv each into place (atomic per file), the release record (ReleaseFile) last.
//
// A trap removes every temp file and dir on every exit.
func downloadScript(p downloadParams) string {
	q := shell.Quote
	version := strings.TrimPrefix(p.Version, "v")
	var b strings.Builder
	fmt.Fprintf(&b, `set -eu
url=%s; want=%s; cache=%s; bin=%s; rel=%s; version=%s
`, q(p.URL), q(strings.ToLower(p.SHA256)), q(p.CacheDir), q(p.BinDir), q(p.ReleaseFile), q(version))
	b.WriteString(`tgz=""; dir=""; stage=""; tmps=""
cleanup() { rm -f "$tgz" $tmps; if [ -n "$dir" ]; then rm -rf "$dir"; fi; if [ -n "$stage" ]; then rm -rf "$stage"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
own() { chown 0:0 "$1" 2>/dev/null || [ "$(id -u)" -ne 0 ]; }
mkdir -p -m 0700 "$cache" && chmod 0700 "$cache"
rm -rf "$cache"/etcd-release.*
`)
	if len(p.Stale) > 0 {
		quoted := make([]string, len(p.Stale))
		for i, s := range p.Stale {
			quoted[i] = q(s)
		}
		b.WriteString("rm -f -- " + strings.Join(quoted, " ") + "\n")
	}
	fmt.Fprintf(&b, `tgz=$(mktemp "$cache/etcd-release.XXXXXXXX")
if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 2 --connect-timeout 20 -o "$tgz" "$url"
elif command -v wget >/dev/null 2>&1; then wget -q -T 20 -t 3 -O "$tgz" "$url"
else echo "neither curl nor wget is installed on this host: install one of them (e.g. apt-get install curl) or use spec.etcd.binaries" >&2; exit %[1]d; fi
got=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then echo "sha256=$got"; echo "the tarball's sha256 is $got, not $want" >&2; exit %[2]d; fi
dir=$(mktemp -d "$cache/etcd-release.XXXXXXXX.d")
tar -xzf "$tgz" -C "$dir" --no-same-owner
src=""
for d in "$dir" "$dir"/*; do if [ -f "$d/etcd" ]; then src=$d; break; fi; done
missing=""
for b in %[3]s; do if [ -z "$src" ] || [ ! -f "$src/$b" ]; then missing="$missing $b"; fi; done
if [ -n "$missing" ]; then echo "the tarball holds no$missing (looked at its top and in its directories)" >&2; exit %[4]d; fi
if ! out=$("$src/etcd" --version 2>&1); then echo "cannot run etcd from the tarball on this $(uname -m) host (wrong architecture?): $(echo "$out" | head -n1)" >&2; exit %[5]d; fi
have=$(echo "$out" | sed -n 's/^etcd Version: //p')
if [ "$have" != "$version" ]; then echo "the tarball holds etcd ${have:-of unknown version}, not $version (spec.etcd.version)" >&2; exit %[6]d; fi
`, exitNoDownloader, exitChecksum, strings.Join(etcdBinaryNames, " "), exitMissingBinary, exitCannotRun, exitVersionMissing)
	if len(p.Files) > 0 {
		b.WriteString(`stage=$(mktemp -d "$cache/etcd-release.XXXXXXXX.files")
tar -xf - -C "$stage" --no-same-owner
( cd "$stage" && sha256sum -c --quiet --strict ) >&2 <<'HACTL_SUMS' || { echo "a file sent with the install does not have its sha256" >&2; exit ` + fmt.Sprint(exitFileChecksum) + `; }
`)
		for _, f := range p.Files {
			fmt.Fprintf(&b, "%s  %s\n", f.Sum, strings.TrimPrefix(f.Path, "/"))
		}
		b.WriteString("HACTL_SUMS\n")
	}
	// Directories: every missing ancestor of a target is created 0755, top down.
	dirs := map[string]bool{}
	var order []string
	addDirs := func(d string) {
		var chain []string
		for ; d != "/" && d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			order = append(order, chain[i])
		}
	}
	addDirs(p.BinDir)
	addDirs(path.Dir(p.ReleaseFile))
	for _, f := range p.Files {
		addDirs(path.Dir(f.Path))
	}
	for _, d := range order {
		fmt.Fprintf(&b, "[ -d %[1]s ] || mkdir -m 0755 %[1]s\n", q(d))
	}
	// Temp copies, each next to its target; then the renames.
	b.WriteString(`record="$want  $(basename "$url")"
mvs=""
stagein() { t=$(mktemp "$(dirname "$2")/.$(basename "$2").hactl-tmp-XXXXXXXXXXXXXXXX"); tmps="$tmps $t"; cp "$1" "$t"; own "$t"; chmod "$3" "$t"; mvs="$mvs $t:$2"; }
`)
	for _, n := range etcdBinaryNames {
		fmt.Fprintf(&b, "stagein \"$src/%[1]s\" \"$bin/%[1]s\" 0755\nrecord=\"$record\n$(sha256sum \"$t\" | cut -d' ' -f1)  $bin/%[1]s\"\n", n)
	}
	for _, f := range p.Files {
		fmt.Fprintf(&b, "stagein \"$stage\"/%s %s %04o\n", q(strings.TrimPrefix(f.Path, "/")), q(f.Path), f.Mode.Perm())
	}
	b.WriteString(`rt=$(mktemp "$(dirname "$rel")/.$(basename "$rel").hactl-tmp-XXXXXXXXXXXXXXXX"); tmps="$tmps $rt"
printf '%s\n' "$record" > "$rt"; own "$rt"; chmod 0644 "$rt"
for m in $mvs; do mv -f "${m%%:*}" "${m#*:}"; done
mv -f "$rt" "$rel"
tmps=""
echo "installed=$have"
`)
	return b.String()
}

// filesTar is the tar archive of files (paths relative to /) sent on the download command's stdin.
func filesTar(files []DesiredFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if f.Data == nil {
			return nil, fmt.Errorf("%s: no content to send", f.Path)
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: 0o600, Size: int64(len(f.Data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DownloadChecksumError refuses a tarball whose sha256 is not spec.etcd.download.sha256. It is found
// before anything is extracted or installed: the host is left as it was (the downloaded temp file
// is removed). Error starts "host <Host>: " as provision's errors do, so the per-host aggregation
// (provision.HostError) does not name the host twice.
type DownloadChecksumError struct {
	Host, URL, Want, Got string
}

func (e *DownloadChecksumError) Error() string {
	return fmt.Sprintf("host %s: the etcd tarball %s has sha256 %s, but spec.etcd.download.sha256 is %s: nothing was installed. "+
		"Check the URL (a mirror serving another file?) and the checksum the release publishes", e.Host, e.URL, e.Got, e.Want)
}

// DownloadError is any other failure of a download install that the install command diagnosed
// itself (no curl or wget, binaries missing from the tarball, wrong architecture or version). Err is
// the *provision.CommandError carrying the command's stderr. Error starts "host <Host>: " (see
// DownloadChecksumError).
type DownloadError struct {
	Host, URL, Reason string
	Err               error
}

func (e *DownloadError) Error() string {
	return fmt.Sprintf("host %s: installing etcd from %s: %s; nothing was installed", e.Host, e.URL, e.Reason)
}

func (e *DownloadError) Unwrap() error { return e.Err }

// download installs the release on m with downloadScript, together with the plan's other files for
// m and the removal of stale temp files: one command. It maps failures to typed errors.
func (ph *Install) download(ctx context.Context, m Member) error {
	g := ph.g
	spec := g.run.Spec
	d := spec.Spec.Etcd.Download
	p := g.ledger.plans[m.Name]
	files, err := filesTar(p.Upload)
	if err != nil {
		return fmt.Errorf("%s: %w", PhaseInstall, err)
	}
	sctx, cancel := g.run.StepCtx(ctx)
	defer cancel()
	script := downloadScript(downloadParams{
		URL: d.URL, SHA256: d.SHA256, Version: spec.Spec.Etcd.Version,
		CacheDir: remoteCacheDir, BinDir: etcd.RemoteBinDir, ReleaseFile: remoteRelease,
		Files: p.Upload, Stale: g.ledger.facts[m.Name].Stale,
	})
	res, err := g.run.Exec(sctx, m.Name, PhaseInstall, script, provision.WithStdin(bytes.NewReader(files)))
	if err != nil {
		return downloadFailure(m.Name, d.URL, d.SHA256, res, err)
	}
	g.run.Printer.Hostf(m.Name, "installed etcd %s from %s (sha256 %s verified) and %d file(s)", spec.Spec.Etcd.Version, d.URL,
		ShortSum(strings.ToLower(d.SHA256)), len(p.Upload))
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
	case exitNoDownloader, exitMissingBinary, exitCannotRun, exitVersionMissing, exitFileChecksum:
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
