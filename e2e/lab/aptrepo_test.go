package lab

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAptRepoKey(t *testing.T) {
	pk := AptPackages()
	key := AptRepoKey("1", "bookworm", "amd64", pk)
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(key) {
		t.Fatalf("key %q is not 12 hex digits", key)
	}
	reversed := slices.Clone(pk)
	slices.Reverse(reversed)
	if got := AptRepoKey("1", "bookworm", "amd64", append(reversed, pk[0])); got != key {
		t.Errorf("key depends on package order or duplicates: %q vs %q", got, key)
	}
	for name, other := range map[string]string{
		"format":   AptRepoKey("2", "bookworm", "amd64", pk),
		"suite":    AptRepoKey("1", "trixie", "amd64", pk),
		"arch":     AptRepoKey("1", "bookworm", "arm64", pk),
		"packages": AptRepoKey("1", "bookworm", "amd64", append(slices.Clone(pk), "sudo")),
		"fewer":    AptRepoKey("1", "bookworm", "amd64", pk[1:]),
	} {
		if other == key {
			t.Errorf("changing the %s does not change the key %q", name, key)
		}
	}
	dir := AptRepoDir("/repo/bin")
	want := filepath.Join("/repo/bin", "apt-"+AptRepoKey(aptRepoFormat, Suite, debArch(runtime.GOARCH), AptPackages()))
	if dir != want {
		t.Errorf("AptRepoDir = %q, want %q", dir, want)
	}
	if !aptRepoDirRE.MatchString(filepath.Base(dir)) {
		t.Errorf("%s does not match %v (removeOldAptRepos would not recognise it)", dir, aptRepoDirRE)
	}
	if debArch("amd64") != "amd64" || debArch("arm64") != "arm64" || debArch("ppc64le") != "ppc64el" {
		t.Errorf("debArch: amd64=%s arm64=%s ppc64le=%s", debArch("amd64"), debArch("arm64"), debArch("ppc64le"))
	}
}

// TestAptPackagesNotInImage: what hactl installs on a Kubernetes node comes from the apt
// repository, not the image, except what other suites need pre-installed.
func TestAptPackagesNotInImage(t *testing.T) {
	want := []string{"containerd", "runc", "containernetworking-plugins", "conntrack", "socat", "ethtool", "iptables", "kmod"}
	if got := AptPackages(); !slices.Equal(got, want) {
		t.Errorf("AptPackages = %v, want %v (kubenode.Packages' apt names)", got, want)
	}
	AptPackages()[0] = "changed"
	if AptPackages()[0] != "containerd" {
		t.Error("AptPackages returns a shared slice")
	}
	image := HostPackages()
	for _, p := range []string{"containerd", "runc", "containernetworking-plugins", "conntrack", "ethtool", "kmod"} {
		if slices.Contains(image, p) {
			t.Errorf("the host image installs %s: the Kubernetes nodes must install it from the apt repository", p)
		}
	}
	// iptables: kube-proxy's image and the lb suites; socat: e2e/lb's squatter, bench/lb.
	for _, p := range []string{"iptables", "socat", "haproxy", "keepalived", "curl", "busybox"} {
		if !slices.Contains(image, p) {
			t.Errorf("the host image lacks %s (other suites need it pre-installed)", p)
		}
	}
	if slices.Contains(disabledUnits[:], "containerd.service") {
		t.Error("disabledUnits names containerd.service, which the image no longer has")
	}
}

func TestAptSourcesScriptContent(t *testing.T) {
	for _, base := range []string{"http://172.28.0.32:8080", "http://172.28.0.32:8080/", MirrorURL(MirrorAddress, "")} {
		s := AptSourcesScript(base)
		for _, want := range []string{
			"'deb [trusted=yes] http://172.28.0.32:8080/apt ./' > /etc/apt/sources.list.d/hactl-lab.list",
			"mkdir -p /etc/apt/hactl-lab-disabled",
			"for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do",
			`mv -f "$f" /etc/apt/hactl-lab-disabled/`,
		} {
			if !strings.Contains(s, want) {
				t.Errorf("AptSourcesScript(%q) lacks %q:\n%s", base, want, s)
			}
		}
		if !strings.HasPrefix(s, "( ") || !strings.HasSuffix(s, "\n") {
			t.Errorf("AptSourcesScript(%q) is not one subshell ending in a newline:\n%s", base, s)
		}
		if strings.Contains(s, "set -e") {
			t.Errorf("set -e has no effect on the left of ||; every step must be checked:\n%s", s)
		}
	}
	if got := AptRepoURL(MirrorAddress); got != "http://172.28.0.32:8080/apt/" {
		t.Errorf("AptRepoURL = %q", got)
	}
	if got := AptRepoURL(MirrorIPv6Address); got != "http://[fd00:db8:28::32]:8080/apt/" {
		t.Errorf("AptRepoURL(IPv6) = %q", got)
	}
	if s := AptSourcesScript("http://x/it's"); !strings.Contains(s, `'deb [trusted=yes] http://x/it'\''s/apt ./'`) {
		t.Errorf("the source line is not shell-quoted:\n%s", s)
	}
}

// runAptSources runs AptSourcesScript with /etc/apt moved to root/etc/apt, inside a caller script
// with set -e that prints "after" when it continues.
func runAptSources(t *testing.T, root string) (string, error) {
	t.Helper()
	s := strings.ReplaceAll(AptSourcesScript("http://m:8080"), "/etc/apt", filepath.Join(root, "etc/apt"))
	out, err := exec.Command("sh", "-c", "set -e\n"+s+"echo after\n").CombinedOutput()
	return string(out), err
}

func TestAptSourcesScriptRuns(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	root := t.TempDir()
	etc := filepath.Join(root, "etc/apt")
	files := map[string]string{
		"sources.list":                  "deb http://deb.debian.org/debian bookworm main\n",
		"sources.list.d/debian.sources": "Types: deb\nURIs: http://deb.debian.org/debian\n",
		"sources.list.d/other.list":     "deb http://example.invalid/ x main\n",
		"sources.list.d/hactl-lab.list": "deb http://stale/apt ./\n",
	}
	for n, c := range files {
		p := filepath.Join(etc, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/nonexistent", filepath.Join(etc, "sources.list.d/dangling.list")); err != nil {
		t.Fatal(err)
	}
	check := func(run string) {
		t.Helper()
		out, err := runAptSources(t, root)
		if err != nil || strings.TrimSpace(out) != "after" {
			t.Fatalf("%s run: %v: %s", run, err, out)
		}
		ents, _ := os.ReadDir(filepath.Join(etc, "sources.list.d"))
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"hactl-lab.list"}) {
			t.Errorf("%s run: sources.list.d holds %v, want only hactl-lab.list", run, names)
		}
		if _, err := os.Lstat(filepath.Join(etc, "sources.list")); !os.IsNotExist(err) {
			t.Errorf("%s run: sources.list still there (%v)", run, err)
		}
		if b, _ := os.ReadFile(filepath.Join(etc, "sources.list.d/hactl-lab.list")); string(b) != "deb [trusted=yes] http://m:8080/apt ./\n" {
			t.Errorf("%s run: hactl-lab.list = %q", run, b)
		}
		for _, n := range []string{"sources.list", "debian.sources", "other.list"} {
			b, err := os.ReadFile(filepath.Join(etc, "hactl-lab-disabled", n))
			if err != nil || !strings.Contains(string(b), "deb") {
				t.Errorf("%s run: %s not kept in hactl-lab-disabled: %v %q", run, n, err, b)
			}
		}
		if _, err := os.Lstat(filepath.Join(etc, "hactl-lab-disabled", "dangling.list")); err != nil {
			t.Errorf("%s run: the dangling symlink was not moved: %v", run, err)
		}
	}
	check("first")
	check("second") // idempotent

	// A failure stops a caller with set -e, with a message.
	bad := t.TempDir()
	if err := os.MkdirAll(filepath.Join(bad, "etc/apt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "etc/apt/hactl-lab-disabled"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runAptSources(t, bad)
	if err == nil || strings.Contains(out, "after") || !strings.Contains(out, "cannot point apt at the mirror") {
		t.Errorf("failing snippet: err %v, output %q", err, out)
	}
}

func TestParseAptSimulation(t *testing.T) {
	out := `NOTE: This is only a simulation!
Reading package lists...
Inst gcc-12-base (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64])
Inst libgcc-s1 (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64]) []
Inst conntrack (1:1.4.7-1+b2 Debian:12.15/oldstable [amd64])
Conf conntrack (1:1.4.7-1+b2 Debian:12.15/oldstable [amd64])
Inst containerd (1.6.20~ds1-1+deb12u3 Debian:12.15/oldstable [amd64])
`
	want := []string{"conntrack=1:1.4.7-1+b2", "containerd=1.6.20~ds1-1+deb12u3", "gcc-12-base=12.2.0-14+deb12u1", "libgcc-s1=12.2.0-14+deb12u1"}
	if got := parseAptSimulation(out); !slices.Equal(got, want) {
		t.Errorf("parseAptSimulation = %v, want %v", got, want)
	}
}

func TestAptRelease(t *testing.T) {
	files := map[string][]byte{"Packages": []byte("Package: a\n"), "Packages.gz": []byte("gz")}
	r := string(aptRelease("amd64", time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC), files))
	for _, want := range []string{
		"Architectures: amd64\n", "Date: Wed, 02 Dec 2026 03:04:05 UTC\n", "MD5Sum:\n", "SHA256:\n",
		fmt.Sprintf(" %x 11 Packages\n", sha256.Sum256(files["Packages"])),
		fmt.Sprintf(" %x 2 Packages.gz\n", sha256.Sum256(files["Packages.gz"])),
	} {
		if !strings.Contains(r, want) {
			t.Errorf("Release lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r, "Suite:") || strings.Contains(r, "Codename:") {
		t.Errorf("a flat repository's Release names no suite (apt would compare it with ./):\n%s", r)
	}
}

// TestEnsureAptRepoCached: a complete repository is returned as it is (no apt-get, no network);
// an incomplete one is not taken for complete.
func TestEnsureAptRepoCached(t *testing.T) {
	bin := t.TempDir()
	dir := AptRepoDir(bin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := readAptRepo(dir); err == nil {
		t.Error("an empty directory is taken for a complete repository")
	}
	for n, c := range map[string]string{"Packages.gz": "x", "a_1_amd64.deb": "debdeb", aptPackagesList: "a=1\nb=2\n"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a build would fail at once
	r, err := EnsureAptRepo(ctx, bin, t.Logf, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if r.Dir != dir || !slices.Equal(r.Packages, []string{"a=1", "b=2"}) || r.Bytes != int64(1+6+8) {
		t.Errorf("EnsureAptRepo = %+v", r)
	}
}

func TestRemoveOldAptRepos(t *testing.T) {
	bin := t.TempDir()
	keep := filepath.Base(AptRepoDir(bin))
	for _, d := range []string{keep, "apt-0123456789ab", "apt-notahash", "kube-images-v1.37.2"} {
		if err := os.MkdirAll(filepath.Join(bin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeOldAptRepos(bin, keep, t.Logf)
	ents, _ := os.ReadDir(bin)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{keep, "apt-notahash", "kube-images-v1.37.2"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
}
