package lab

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// Host image recipe. Anything that changes the image's content must change ImageTag's input:
// the package list, the suite, the files written into the rootfs, or imageRecipeVersion.
const (
	// ImageRepo is the local image repository of lab hosts (never pushed anywhere).
	ImageRepo = "hactl-lab/host"
	// Suite is the Debian release the host image is bootstrapped from.
	Suite = "bookworm"
	// imageRecipeVersion is bumped whenever the build steps change in a way the hashed inputs
	// below do not capture.
	imageRecipeVersion = "2"
	// sshdDropIn is written to /etc/ssh/sshd_config.d/hactl-lab.conf: root logs in with a key only
	// (Debian's default, made explicit), no reverse DNS lookups that would slow logins.
	sshdDropIn = "# hactl lab: root logs in with a key only.\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUseDNS no\n"
	// sudoersDropIn is written to /etc/sudoers.d/hactl-lab (0440): SudoUser has passwordless sudo,
	// SudoPasswordUser's sudo asks for its password (set per lab, see Lab.SudoPassword).
	sudoersDropIn = "# hactl lab: " + SudoUser + " has passwordless sudo; " + SudoPasswordUser + "'s sudo asks for its password.\n" +
		SudoUser + " ALL=(ALL:ALL) NOPASSWD: ALL\n" +
		SudoPasswordUser + " ALL=(ALL:ALL) ALL\n"
)

// The non-root users of every lab host (home /home/<name>, shell /bin/bash, the lab's key in
// ~/.ssh/authorized_keys, no password login over SSH).
const (
	// SudoUser has passwordless sudo.
	SudoUser = "hactl"
	// SudoPasswordUser's sudo needs its password, generated per lab (Lab.SudoPassword, the file
	// Lab.SudoPasswordFile).
	SudoPasswordUser = "hactlpw"
)

// HostPackages returns the Debian packages installed into the host image (debootstrap --include),
// as verified in LAB.md: the base host, plus socat (e2e/lb's port squatter and bench/lb's stats
// read use it on the load balancers) and zstd (a restore's members fetch a zstd-compressed
// snapshot from the object store and decompress it themselves, as on a real Debian or Ubuntu host
// that has zstd). What hactl installs on a Kubernetes node (containerd, runc,
// the CNI plugins, conntrack, ethtool, kmod: AptPackages) is not in the image: the lab's Kubernetes
// nodes install it from the mirror's apt repository (EnsureAptRepo, AptSourcesScript), the way a
// real machine does. A fresh slice on every call.
func HostPackages() []string {
	return []string{
		"systemd", "systemd-sysv", "openssh-server", "iproute2", "procps", "ca-certificates",
		"curl", "iptables", "haproxy", "keepalived", "sudo", "busybox", "socat", "zstd",
	}
}

// disabledUnits are enabled by their packages' postinst scripts but must not run until hactl
// configures them: a host starts clean, as a freshly installed machine whose admin has not
// configured these services yet.
var disabledUnits = [...]string{"haproxy.service", "keepalived.service"}

// importChanges are the Dockerfile instructions applied by `docker import --change`: systemd is
// the default command and knows it runs in a container. (docker import rejects STOPSIGNAL; the
// lab never uses `docker stop`.)
var importChanges = [...]string{"ENV container=docker", `CMD ["/lib/systemd/systemd"]`}

// ImageTag returns the tag of the host image built from the given recipe inputs: the first 12 hex
// digits of a SHA-256 over the recipe version, suite, package list (order-insensitive) and the
// content of every file the recipe writes. Same inputs, same tag; any change, a new tag.
func ImageTag(recipeVersion, suite string, packages []string) string {
	pk := append([]string(nil), packages...)
	sort.Strings(pk)
	h := sha256.New()
	fmt.Fprintf(h, "recipe=%s\nsuite=%s\npackages=%s\n", recipeVersion, suite, strings.Join(pk, ","))
	fmt.Fprintf(h, "sshd=%q\ndisabled=%s\nimport=%q\n", sshdDropIn, strings.Join(disabledUnits[:], ","), importChanges)
	fmt.Fprintf(h, "users=%s,%s\nsudoers=%q\n", SudoUser, SudoPasswordUser, sudoersDropIn)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// ImageRef returns the reference of the current host image, "hactl-lab/host:<tag>".
func ImageRef() string {
	return ImageRepo + ":" + ImageTag(imageRecipeVersion, Suite, HostPackages())
}

// EnsureImage returns the host image reference, building it first when `docker image inspect`
// does not find it. The build runs debootstrap --variant=minbase against the mirror found in the
// machine's apt sources (FindMirror("/etc/apt", Suite)) into a temporary rootfs, adjusts the rootfs
// (see sshdDropIn, disabledUnits), imports it with `tar -c | docker import`, and removes the rootfs.
// It takes about 3 minutes and needs root; progress goes to opts.Logf, commands to opts.Debugf.
func EnsureImage(ctx context.Context, opts Options) (string, error) {
	d := docker{debugf: opts.Debugf}
	ref := ImageRef()
	if _, err := d.run(ctx, nil, "image", "inspect", "--format", "{{.Id}}", ref); err == nil {
		opts.Logf.printf("host image %s is cached", ref)
		return ref, nil
	} else if ctx.Err() != nil {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	mirror, err := FindMirror("/etc/apt", Suite)
	if err != nil {
		return "", fmt.Errorf("build host image %s: %w", ref, err)
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", fmt.Errorf("build host image %s: debootstrap is not installed (run hack/ensure-docker.sh): %w", ref, err)
	}
	tmp, err := os.MkdirTemp("", "hactl-lab-rootfs-")
	if err != nil {
		return "", fmt.Errorf("build host image %s: %w", ref, err)
	}
	rootfs := filepath.Join(tmp, "rootfs")
	defer func() {
		if err := removeRootfs(tmp); err != nil {
			opts.Logf.printf("warning: %v", err)
		}
	}()

	start := time.Now()
	opts.Logf.printf("building host image %s: debootstrap %s from %s (about 3 minutes)", ref, Suite, mirror)
	if _, err := runCmd(ctx, opts.Debugf, nil, "debootstrap", "--variant=minbase",
		"--include="+strings.Join(HostPackages(), ","), Suite, rootfs, mirror); err != nil {
		if log, rerr := tailFile(filepath.Join(rootfs, "debootstrap", "debootstrap.log"), 20); rerr == nil {
			err = fmt.Errorf("%w\nlast lines of debootstrap.log:\n%s", err, log)
		}
		return "", fmt.Errorf("build host image %s: %w", ref, err)
	}
	opts.Logf.printf("debootstrap done in %s", time.Since(start).Round(time.Second))
	if err := customizeRootfs(rootfs); err != nil {
		return "", fmt.Errorf("build host image %s: %w", ref, err)
	}
	if err := addUsers(ctx, opts.Debugf, rootfs); err != nil {
		return "", fmt.Errorf("build host image %s: %w", ref, err)
	}
	if err := importRootfs(ctx, d, rootfs, ref); err != nil {
		return "", fmt.Errorf("build host image %s: %w", ref, err)
	}
	opts.Logf.printf("host image %s built in %s", ref, time.Since(start).Round(time.Second))
	removeOldImages(ctx, d, ImageRepo, ref, opts.Logf)
	return ref, nil
}

// removeOldImages removes the other tags of repo (earlier recipes or inputs), best effort: an
// image still used by a container stays, with a warning.
func removeOldImages(ctx context.Context, d docker, repo, keep string, logf LogFunc) {
	out, err := d.run(ctx, nil, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repo)
	if err != nil {
		logf.printf("warning: list old %s images: %v", repo, err)
		return
	}
	for _, ref := range strings.Fields(out) {
		if ref == keep || !strings.HasPrefix(ref, repo+":") {
			continue
		}
		if _, err := d.run(ctx, nil, "image", "rm", ref); err != nil {
			logf.printf("warning: remove old image: %v", err)
		}
	}
}

// customizeRootfs makes the bootstrapped tree a lab host: sshd enabled and key-only for root,
// an empty machine-id (systemd makes one per container), services hactl configures disabled,
// and apt's caches emptied.
func customizeRootfs(rootfs string) error {
	write := func(rel, content string, mode os.FileMode) error {
		p := filepath.Join(rootfs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(content), mode)
	}
	if err := write("etc/machine-id", "", 0o444); err != nil {
		return fmt.Errorf("customize rootfs: %w", err)
	}
	if err := write("etc/ssh/sshd_config.d/hactl-lab.conf", sshdDropIn, 0o644); err != nil {
		return fmt.Errorf("customize rootfs: %w", err)
	}
	wants := filepath.Join(rootfs, "etc/systemd/system/multi-user.target.wants")
	if err := os.MkdirAll(wants, 0o755); err != nil {
		return fmt.Errorf("customize rootfs: %w", err)
	}
	sshUnit := filepath.Join(wants, "ssh.service")
	if _, err := os.Lstat(sshUnit); errors.Is(err, os.ErrNotExist) {
		if err := os.Symlink("/lib/systemd/system/ssh.service", sshUnit); err != nil {
			return fmt.Errorf("customize rootfs: enable ssh.service: %w", err)
		}
	}
	for _, u := range disabledUnits {
		if err := os.Remove(filepath.Join(wants, u)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("customize rootfs: disable %s: %w", u, err)
		}
	}
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, glob))
		for _, m := range matches {
			if err := os.Remove(m); err != nil {
				return fmt.Errorf("customize rootfs: %w", err)
			}
		}
	}
	return nil
}

// addUsers creates SudoUser and SudoPasswordUser in the rootfs (useradd in a chroot; password
// field "*": no password login, but not "locked") and installs sudoersDropIn, checked by visudo.
func addUsers(ctx context.Context, debugf LogFunc, rootfs string) error {
	for _, u := range []string{SudoUser, SudoPasswordUser} {
		if _, err := runCmd(ctx, debugf, nil, "chroot", rootfs, "useradd", "--create-home", "--user-group",
			"--shell", "/bin/bash", "--password", "*", u); err != nil {
			return fmt.Errorf("add user %s: %w", u, err)
		}
	}
	p := filepath.Join(rootfs, "etc/sudoers.d/hactl-lab")
	if err := os.WriteFile(p, []byte(sudoersDropIn), 0o440); err != nil {
		return fmt.Errorf("add users: %w", err)
	}
	if err := os.Chmod(p, 0o440); err != nil { // umask-proof
		return fmt.Errorf("add users: %w", err)
	}
	if _, err := runCmd(ctx, debugf, nil, "chroot", rootfs, "visudo", "-c", "-f", "/etc/sudoers.d/hactl-lab"); err != nil {
		return fmt.Errorf("add users: check sudoers: %w", err)
	}
	return nil
}

// importRootfs streams `tar -C rootfs -c .` into `docker import - ref` with importChanges.
func importRootfs(ctx context.Context, d docker, rootfs, ref string) error {
	return importRootfsAs(ctx, d, rootfs, ref, importChanges[:], "hactl lab host: debootstrap "+Suite+" "+strings.Join(HostPackages(), ","))
}

// importRootfsAs streams `tar -C rootfs -c .` into `docker import - ref` with the Dockerfile
// instructions changes and the commit message.
func importRootfsAs(ctx context.Context, d docker, rootfs, ref string, changes []string, message string) error {
	d.debugf.printf("$ tar -C %s --numeric-owner -c . | (next command)", shell.Quote(rootfs))
	tar := exec.CommandContext(ctx, "tar", "-C", rootfs, "--numeric-owner", "-c", ".")
	var tarErr strings.Builder
	tar.Stderr = &tarErr
	out, err := tar.StdoutPipe()
	if err != nil {
		return fmt.Errorf("import rootfs: %w", err)
	}
	if err := tar.Start(); err != nil {
		return fmt.Errorf("import rootfs: start tar: %w", err)
	}
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	args = append(args, "--message", message, "-", ref)
	_, dockerErr := d.run(ctx, out, args...)
	out.Close() // unblock tar if docker stopped reading early
	if err := tar.Wait(); err != nil && dockerErr == nil {
		return fmt.Errorf("import rootfs: tar: %w: %s", err, strings.TrimSpace(tarErr.String()))
	}
	if dockerErr != nil {
		return fmt.Errorf("import rootfs: %w", dockerErr)
	}
	return nil
}

// removeRootfs removes the temporary build directory after making sure nothing is still mounted
// below it (debootstrap mounts proc and sys into the target and may leave them on failure); it
// refuses to remove anything if an unmount fails.
func removeRootfs(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	for _, m := range mounts { // deepest first
		if out, err := exec.Command("umount", "-l", m).CombinedOutput(); err != nil {
			return fmt.Errorf("remove %s: umount %s: %w: %s (left in place)", dir, m, err, strings.TrimSpace(string(out)))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// mountsUnder lists mount points at or below dir from /proc/self/mounts, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		mp := unescapeMount(fields[1])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, sc.Err()
}

// unescapeMount decodes the octal escapes (\040 for space, ...) of /proc/self/mounts.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func tailFile(path string, n int) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n"), nil
}

// aptSource is one "deb" entry of the machine's apt configuration.
type aptSource struct {
	URIs   []string
	Suites []string
}

// FindMirror returns the Debian mirror debootstrap should use, read from the machine's apt
// configuration under aptDir (normally /etc/apt): the deb822 files sources.list.d/*.sources first,
// then the one-line sources.list and sources.list.d/*.list. It prefers an entry listing suite,
// else the first entry that is not a security archive. Only http, https, ftp and file URIs are
// considered. The mirror is never hard-coded: the lab uses whatever archive this machine uses.
func FindMirror(aptDir, suite string) (string, error) {
	var all []aptSource
	var read []string
	deb822, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.sources"))
	sort.Strings(deb822)
	for _, p := range deb822 {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("find apt mirror: %w", err)
		}
		srcs, err := parseDeb822Sources(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("find apt mirror: %s: %w", p, err)
		}
		all = append(all, srcs...)
		read = append(read, p)
	}
	oneLine, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.list"))
	sort.Strings(oneLine)
	oneLine = append([]string{filepath.Join(aptDir, "sources.list")}, oneLine...)
	for _, p := range oneLine {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return "", fmt.Errorf("find apt mirror: %w", err)
		}
		srcs, err := parseSourcesList(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("find apt mirror: %s: %w", p, err)
		}
		all = append(all, srcs...)
		read = append(read, p)
	}
	m, ok := pickMirror(all, suite)
	if !ok {
		return "", fmt.Errorf("find apt mirror: no usable \"deb\" http(s)/ftp/file entry in %v (looked in %s)", read, aptDir)
	}
	return m, nil
}

// pickMirror chooses the first URI of the first entry listing suite, else of the first entry
// whose suites are not all "*-security" (the security archive does not hold the base suite).
func pickMirror(srcs []aptSource, suite string) (string, bool) {
	first := func(s aptSource) (string, bool) {
		for _, u := range s.URIs {
			if pu, err := url.Parse(u); err == nil {
				switch pu.Scheme {
				case "http", "https", "ftp", "file":
					return u, true
				}
			}
		}
		return "", false
	}
	for _, s := range srcs {
		for _, su := range s.Suites {
			if su == suite {
				if u, ok := first(s); ok {
					return u, true
				}
			}
		}
	}
	for _, s := range srcs {
		security := len(s.Suites) > 0
		for _, su := range s.Suites {
			if !strings.HasSuffix(su, "-security") && !strings.HasSuffix(su, "/updates") {
				security = false
			}
		}
		if security {
			continue
		}
		if u, ok := first(s); ok {
			return u, true
		}
	}
	return "", false
}

// parseDeb822Sources reads apt's deb822 format (sources(5)): stanzas separated by blank lines,
// "Field: value" lines, continuation lines starting with white space, "#" comments. It returns
// the enabled stanzas whose Types include "deb".
func parseDeb822Sources(r io.Reader) ([]aptSource, error) {
	var out []aptSource
	fields := map[string]string{}
	last := ""
	flush := func() {
		defer func() { fields = map[string]string{}; last = "" }()
		if len(fields) == 0 || strings.EqualFold(fields["enabled"], "no") {
			return
		}
		if !containsWord(fields["types"], "deb") {
			return
		}
		out = append(out, aptSource{URIs: strings.Fields(fields["uris"]), Suites: strings.Fields(fields["suites"])})
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("malformed deb822 line %q", line)
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// parseSourcesList reads apt's one-line format: "deb [options] uri suite [component...]".
func parseSourcesList(r io.Reader) ([]aptSource, error) {
	var out []aptSource
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			for len(f) > 0 {
				done := strings.HasSuffix(f[0], "]")
				f = f[1:]
				if done {
					break
				}
			}
		}
		if len(f) < 2 {
			continue
		}
		out = append(out, aptSource{URIs: []string{f[0]}, Suites: []string{f[1]}})
	}
	return out, sc.Err()
}

func containsWord(s, w string) bool {
	for _, x := range strings.Fields(s) {
		if x == w {
			return true
		}
	}
	return false
}
