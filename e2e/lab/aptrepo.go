package lab

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// The lab's apt repository: the Debian packages hactl installs on a Kubernetes node, with their
// dependency closure, fetched on this machine with `apt-get download` from the same mirror and
// suite the host image is bootstrapped from, and served by the mirror host (Options.Mirror) as a
// flat repository at http://<mirror>:MirrorPort/AptRepoPath/. Lab hosts pointed at it with
// AptSourcesScript install those packages the way a real machine does (hactl's
// provision.InstallCommand), instead of finding them pre-installed in the image.
const (
	// AptRepoPath is the repository's directory on the mirror, below mirrorRoot and in its URLs.
	AptRepoPath = "apt"
	// AptSourcesFile is the apt source AptSourcesScript writes.
	AptSourcesFile = "/etc/apt/sources.list.d/hactl-lab.list"
	// AptDisabledDir is where AptSourcesScript moves the host's other apt sources.
	AptDisabledDir = "/etc/apt/hactl-lab-disabled"
	// aptRepoFormat is bumped when the repository's layout or the way it is built changes in a way
	// AptRepoKey's other inputs do not capture (invalidates the cache).
	aptRepoFormat = "1"
	// aptPackagesList (in the repository) lists the packages it holds as name=version, one a line.
	aptPackagesList = "packages.list"
	// debianKeyring verifies the Debian archive while the repository is built (when present).
	debianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
)

// AptPackages returns the packages the lab's apt repository is built for: the Debian names hactl
// installs on a Kubernetes node (kubenode.Packages for apt-get with every runtime command
// missing). The repository holds them and everything they depend on (no recommends). A fresh
// slice on every call.
func AptPackages() []string {
	return []string{"containerd", "runc", "containernetworking-plugins", "conntrack", "socat", "ethtool", "iptables", "kmod"}
}

// AptRepoKey returns the cache key of the repository built from the given inputs: the first 12
// hex digits of a SHA-256 over the format, suite, Debian architecture and package list
// (order-insensitive, duplicates ignored). Same inputs, same key; any change, a new key.
func AptRepoKey(format, suite, arch string, packages []string) string {
	pk := append([]string(nil), packages...)
	sort.Strings(pk)
	pk = slices.Compact(pk)
	h := sha256.New()
	fmt.Fprintf(h, "format=%s\nsuite=%s\narch=%s\npackages=%s\n", format, suite, arch, strings.Join(pk, ","))
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// AptRepoDir returns the directory of the current repository in binDir: <binDir>/apt-<key>.
func AptRepoDir(binDir string) string {
	return filepath.Join(binDir, "apt-"+AptRepoKey(aptRepoFormat, Suite, debArch(runtime.GOARCH), AptPackages()))
}

// aptRepoDirRE matches the names of repository directories (current or of earlier inputs).
var aptRepoDirRE = regexp.MustCompile(`^apt-[0-9a-f]{12}$`)

// debArch is Debian's name of Go architecture goarch.
func debArch(goarch string) string {
	switch goarch {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	}
	return goarch
}

// AptSourcesScript returns a POSIX sh snippet that points the host's apt at the lab's repository
// on the mirror: it moves every other apt source (/etc/apt/sources.list and everything in
// /etc/apt/sources.list.d/ but AptSourcesFile) into AptDisabledDir, then writes AptSourcesFile
// with `deb [trusted=yes] <mirrorURL>/apt ./`. mirrorURL is the mirror's base URL, e.g.
// "http://172.28.0.32:8080" (a trailing slash is ignored, so MirrorURL(MirrorAddress, "") works).
// The snippet is a subshell (every step checked: set -e does not apply on the left of ||): it
// changes no variable or option of the script it is part of, and its exit status is non-zero
// (with a message on standard error) when a step fails, so a caller with set -e stops there. Running it
// again changes nothing. It does not run apt-get update: hactl's install command does when the
// first install attempt fails.
func AptSourcesScript(mirrorURL string) string {
	line := "deb [trusted=yes] " + strings.TrimRight(mirrorURL, "/") + "/" + AptRepoPath + " ./"
	return fmt.Sprintf(`( mkdir -p %[1]s || exit 1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do
    if [ "$f" != %[2]s ] && { [ -e "$f" ] || [ -L "$f" ]; }; then mv -f "$f" %[1]s/ || exit 1; fi
  done
  printf '%%s\n' %[3]s > %[2]s || exit 1
) || { echo 'hactl lab: cannot point apt at the mirror' >&2; false; }
`, AptDisabledDir, AptSourcesFile, shell.Quote(line))
}

// AptRepo is the lab's apt repository on this machine.
type AptRepo struct {
	// Dir is the repository (AptRepoDir): the .deb files, Packages, Packages.gz, Release and
	// packages.list.
	Dir string
	// Packages are the packages it holds as name=version, sorted.
	Packages []string
	// Bytes is the size of its files.
	Bytes int64
}

// EnsureAptRepo returns the lab's apt repository in binDir, building it first when AptRepoDir
// does not hold a complete one. The build needs root, apt-get and dpkg-scanpackages (dpkg-dev;
// hack/ensure-docker.sh installs it) and Debian's archive: with a private apt configuration (its
// own lists, cache and an empty dpkg status; only `deb <mirror> <Suite> main`, the mirror read
// from the machine's apt sources as for the host image) it runs apt-get update, simulates
// installing AptPackages on an empty system to get the dependency closure with exact versions,
// `apt-get download`s them and indexes them (dpkg-scanpackages, then Packages.gz and a Release
// file). It builds in a temporary directory renamed into place at the end, holds a lock on
// <binDir>/.apt-repo.lock meanwhile (concurrent callers wait, then find it built), and removes
// repositories of other keys. About 10 s and 45 MB. Progress goes to logf, commands to debugf.
func EnsureAptRepo(ctx context.Context, binDir string, logf, debugf LogFunc) (AptRepo, error) {
	dir := AptRepoDir(binDir)
	if r, err := readAptRepo(dir); err == nil {
		return r, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return AptRepo{}, fmt.Errorf("apt repository: %w", err)
	}
	unlock, err := lockFile(filepath.Join(binDir, ".apt-repo.lock"))
	if err != nil {
		return AptRepo{}, fmt.Errorf("apt repository: %w", err)
	}
	defer unlock()
	if r, err := readAptRepo(dir); err == nil { // built by a concurrent caller
		return r, nil
	}
	start := time.Now()
	if err := buildAptRepo(ctx, binDir, dir, logf, debugf); err != nil {
		return AptRepo{}, fmt.Errorf("apt repository %s: %w", dir, err)
	}
	r, err := readAptRepo(dir)
	if err != nil {
		return AptRepo{}, fmt.Errorf("apt repository: %w", err)
	}
	logf.printf("apt repository %s: %d packages, %.1f MB, built in %s", dir, len(r.Packages),
		float64(r.Bytes)/1e6, time.Since(start).Round(100*time.Millisecond))
	removeOldAptRepos(binDir, filepath.Base(dir), logf)
	return r, nil
}

// readAptRepo returns the repository in dir when it is complete: it holds packages.list and
// Packages.gz (the directory only appears, renamed into place, once fully built).
func readAptRepo(dir string) (AptRepo, error) {
	b, err := os.ReadFile(filepath.Join(dir, aptPackagesList))
	if err != nil {
		return AptRepo{}, err
	}
	if _, err := os.Stat(filepath.Join(dir, "Packages.gz")); err != nil {
		return AptRepo{}, err
	}
	r := AptRepo{Dir: dir, Packages: strings.Fields(string(b))}
	if len(r.Packages) == 0 {
		return AptRepo{}, fmt.Errorf("%s lists no packages", filepath.Join(dir, aptPackagesList))
	}
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			r.Bytes += info.Size()
		}
		return err
	})
	return r, err
}

func buildAptRepo(ctx context.Context, binDir, dir string, logf, debugf LogFunc) error {
	for _, tool := range []string{"apt-get", "dpkg-scanpackages"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (dpkg-scanpackages is in dpkg-dev; run hack/ensure-docker.sh): %w", tool, err)
		}
	}
	mirror, err := FindMirror("/etc/apt", Suite)
	if err != nil {
		return err
	}
	arch := debArch(runtime.GOARCH)
	tmp, err := os.MkdirTemp(binDir, ".apt-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	repo := filepath.Join(tmp, "repo")
	for _, d := range []string{"lists/partial", "archives/partial", "sources.list.d", "preferences.d", "repo"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	signedBy := ""
	if _, err := os.Stat(debianKeyring); err == nil {
		signedBy = "[signed-by=" + debianKeyring + "] "
	}
	if err := os.WriteFile(filepath.Join(tmp, "sources.list"), []byte("deb "+signedBy+mirror+" "+Suite+" main\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "status"), nil, 0o644); err != nil {
		return err
	}
	// apt runs apt-get with the private configuration; its errors name the subcommand and show
	// apt-get's standard error, not the long option list (debugf shows that).
	apt := func(cwd string, args ...string) (string, error) {
		out, err := runIn(ctx, debugf, cwd, "apt-get", append(privateAptOptions(tmp, arch), args...)...)
		var ce *CommandError
		if errors.As(err, &ce) {
			err = fmt.Errorf("apt-get %s (private configuration in %s): %w: %s", args[0], tmp, ce.Err, strings.TrimSpace(ce.Stderr))
		}
		return out, err
	}
	logf.printf("building the lab's apt repository: %s from %s %s (%s)", strings.Join(AptPackages(), " "), mirror, Suite, arch)
	// --error-on=any: without it apt-get update exits 0 when the archive cannot be reached.
	if _, err := apt(tmp, "update", "--error-on=any"); err != nil {
		return fmt.Errorf("apt-get update against %s %s failed (the repository is fetched from Debian's archive): %w", mirror, Suite, err)
	}
	sim, err := apt(tmp, append([]string{"install", "--simulate", "--no-install-recommends"}, AptPackages()...)...)
	if err != nil {
		return fmt.Errorf("resolve the dependencies of %s: %w", strings.Join(AptPackages(), " "), err)
	}
	pkgs := parseAptSimulation(sim)
	for _, want := range AptPackages() {
		if !slices.ContainsFunc(pkgs, func(p string) bool { return strings.HasPrefix(p, want+"=") }) {
			return fmt.Errorf("apt-get install --simulate does not install %s:\n%s", want, sim)
		}
	}
	if _, err := apt(repo, append([]string{"download"}, pkgs...)...); err != nil {
		return fmt.Errorf("apt-get download: %w", err)
	}
	// dpkg-scanpackages warns on stderr that there is no override file; its stdout is the index.
	index, err := runIn(ctx, debugf, repo, "dpkg-scanpackages", "--multiversion", ".", "/dev/null")
	if err != nil {
		return err
	}
	if n := strings.Count("\n"+index, "\nPackage: "); n != len(pkgs) {
		return fmt.Errorf("dpkg-scanpackages indexed %d packages, %d downloaded", n, len(pkgs))
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if _, err := zw.Write([]byte(index)); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	release := aptRelease(arch, time.Now(), map[string][]byte{"Packages": []byte(index), "Packages.gz": gz.Bytes()})
	files := []struct {
		name string
		data []byte
	}{
		{"Packages", []byte(index)},
		{"Packages.gz", gz.Bytes()},
		{"Release", release},
		{aptPackagesList, []byte(strings.Join(pkgs, "\n") + "\n")},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(repo, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	if err := os.Chmod(repo, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil { // an incomplete leftover (readAptRepo refused it)
		return err
	}
	return os.Rename(repo, dir)
}

// privateAptOptions are apt-get's options for building the repository with the private apt
// configuration in dir: its own sources, lists, cache and (empty) dpkg status, one architecture,
// no translations or AppStream metadata, and no sandbox user (the files are root's).
func privateAptOptions(dir, arch string) []string {
	opts := []string{
		"Dir::State=" + dir,
		"Dir::State::status=" + filepath.Join(dir, "status"),
		"Dir::State::lists=" + filepath.Join(dir, "lists"),
		"Dir::Cache=" + dir,
		"Dir::Cache::archives=" + filepath.Join(dir, "archives"),
		"Dir::Cache::pkgcache=",
		"Dir::Cache::srcpkgcache=",
		"Dir::Etc::SourceList=" + filepath.Join(dir, "sources.list"),
		"Dir::Etc::SourceParts=" + filepath.Join(dir, "sources.list.d"),
		"Dir::Etc::Preferences=" + filepath.Join(dir, "preferences"),
		"Dir::Etc::PreferencesParts=" + filepath.Join(dir, "preferences.d"),
		"APT::Architecture=" + arch,
		"APT::Architectures=" + arch,
		"APT::Sandbox::User=root",
		"Acquire::Languages=none",
		"Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
		"Debug::NoLocking=true",
	}
	out := []string{"-q"}
	for _, o := range opts {
		out = append(out, "-o", o)
	}
	return out
}

// aptInstRE matches apt-get --simulate's "Inst NAME (VERSION ..." lines.
var aptInstRE = regexp.MustCompile(`^Inst (\S+) \((\S+) `)

// parseAptSimulation returns the packages `apt-get install --simulate` would install, as
// name=version, sorted.
func parseAptSimulation(out string) []string {
	var pkgs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m := aptInstRE.FindStringSubmatch(sc.Text()); m != nil {
			pkgs = append(pkgs, m[1]+"="+m[2])
		}
	}
	sort.Strings(pkgs)
	return slices.Compact(pkgs)
}

// aptRelease returns the flat repository's Release file: its date, architecture and the MD5 and
// SHA-256 sums of the index files (apt checks the indexes against it).
func aptRelease(arch string, date time.Time, files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "Origin: hactl-lab\nLabel: hactl-lab\nArchitectures: %s\nDate: %s\n",
		arch, date.UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC"))
	b.WriteString("Description: the hactl lab's Kubernetes node packages (" + strings.Join(AptPackages(), " ") + ") and their dependencies\n")
	b.WriteString("MD5Sum:\n")
	for _, n := range names {
		fmt.Fprintf(&b, " %x %d %s\n", md5.Sum(files[n]), len(files[n]), n)
	}
	b.WriteString("SHA256:\n")
	for _, n := range names {
		fmt.Fprintf(&b, " %x %d %s\n", sha256.Sum256(files[n]), len(files[n]), n)
	}
	return []byte(b.String())
}

// removeOldAptRepos removes binDir's repositories of other keys, best effort.
func removeOldAptRepos(binDir, keep string, logf LogFunc) {
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != keep && aptRepoDirRE.MatchString(e.Name()) {
			if err := os.RemoveAll(filepath.Join(binDir, e.Name())); err != nil {
				logf.printf("warning: remove old apt repository: %v", err)
			}
		}
	}
}

// runIn runs name args... in directory dir and returns its standard output; failures are
// *CommandError.
func runIn(ctx context.Context, debugf LogFunc, dir, name string, args ...string) (string, error) {
	full := append([]string{name}, args...)
	debugf.printf("$ (cd %s && %s)", shell.Quote(dir), shell.Join(full...))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(ctxErr, err)
		}
		return stdout.String(), &CommandError{Args: full, Stderr: stderr.String(), Err: err}
	}
	return stdout.String(), nil
}

// lockFile takes an exclusive flock on path (created when missing), waiting for it; the returned
// function releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
