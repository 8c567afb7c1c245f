//go:build e2e

package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestLabIntegration exercises the whole lab against docker (part of the e2e suite: build tag e2e,
// run by `make e2e`; it replaces any running hactl-lab): one lab with every option the suites use
// (Kubernetes nodes, the bastion, IPv6, the mirror), its hosts, then each property the access e2e
// tests rely on (checkEverything).
func TestLabIntegration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err := Up(ctx, Options{Members: 3, RepoRoot: root, Kubernetes: true, Bastion: true, IPv6: true, Mirror: true,
		Dir: t.TempDir(), Logf: t.Logf, Debugf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up (%d hosts, everything) took %s", len(l.Hosts()), time.Since(start))
	defer func() {
		if err := l.Down(context.Background()); err != nil {
			t.Error(err)
		}
		if left := labObjects(t); left != "" {
			t.Errorf("left after Down: %s", left)
		}
	}()

	hostname := func(host string) string {
		t.Helper()
		c, err := l.Dial(ctx, host)
		if err != nil {
			t.Fatalf("dial %s: %v", host, err)
		}
		defer c.Close()
		out, err := sshRun(c, "hostname")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, h := range l.Hosts() {
		if got := hostname(h.Name); got != h.Name {
			t.Errorf("ssh %s: hostname %q", h.Name, got)
		}
	}
	for _, u := range []string{"haproxy", "keepalived"} {
		if out, err := l.Exec(ctx, "lb-a", "systemctl", "is-enabled", u); err == nil || strings.TrimSpace(out) != "disabled" {
			t.Errorf("%s on lb-a: %q, %v; want disabled", u, out, err)
		}
	}

	// Attach finds the same lab.
	a, err := Attach(ctx, Options{Dir: l.Dir(), Logf: t.Logf, Debugf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(a.Hosts()), fmt.Sprint(l.Hosts()); got != want || a.Image() != l.Image() {
		t.Errorf("Attach: hosts %s image %s, want %s %s", got, a.Image(), want, l.Image())
	}

	// Kubernetes nodes (cp-a/b/c): prepared as a user's machines would be, nothing of Kubernetes.
	checkNode := func(host string) {
		t.Helper()
		if out, err := l.Exec(ctx, host, "readlink", "/dev/kmsg"); err != nil || strings.TrimSpace(out) != "/dev/null" {
			t.Errorf("%s: /dev/kmsg -> %q, %v", host, out, err)
		}
		if out, err := l.Exec(ctx, host, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && cat /proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(out) != "1" {
			t.Errorf("%s: /proc/sys not writable: %q, %v", host, out, err)
		}
		// Its own cgroup hierarchy: systemd's init.scope at the root, and a cgroup made on this node
		// is invisible on another.
		if out, err := l.Exec(ctx, host, "grep", ":memory:", "/proc/1/cgroup"); err != nil || strings.TrimSpace(out) != "4:memory:/init.scope" && !strings.HasSuffix(strings.TrimSpace(out), ":memory:/init.scope") {
			t.Errorf("%s: PID 1's memory cgroup %q, %v; want /init.scope (a private cgroup namespace)", host, out, err)
		}
		if out, err := l.Exec(ctx, host, "sh", "-c", "ls /sys/fs/cgroup/"); err != nil || strings.Contains(out, "hugetlb") || strings.Contains(out, "perf_event") {
			t.Errorf("%s: cgroup hierarchies %q, %v: the machine's shared roots must not be mounted", host, out, err)
		}
		if out, err := l.Exec(ctx, host, "sh", "-c", "test ! -e /usr/bin/containerd && grep -h '^deb' /etc/apt/sources.list.d/*.list"); err != nil ||
			!strings.Contains(out, "http://"+MirrorAddress+":8080/apt") {
			t.Errorf("%s: containerd preinstalled or apt not pointed at the mirror: %q, %v", host, out, err)
		}
	}
	for _, h := range l.KubeNodes() {
		checkNode(h.Name)
	}
	if _, err := l.Exec(ctx, "cp-a", "mkdir", "/sys/fs/cgroup/memory/hactl-lab-probe"); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Exec(ctx, "cp-b", "sh", "-c", "find /sys/fs/cgroup/memory -name hactl-lab-probe | wc -l"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("cp-b sees cp-a's cgroup: %q, %v", out, err)
	}
	if _, err := l.Exec(ctx, "cp-a", "rmdir", "/sys/fs/cgroup/memory/hactl-lab-probe"); err != nil {
		t.Error(err)
	}
	if out, err := l.Exec(ctx, "cp-a", "sh", "-c", "apt-get update -q >/dev/null && apt-cache policy containerd | grep -c "+MirrorAddress); err != nil || strings.TrimSpace(out) == "0" {
		t.Errorf("cp-a: the mirror's repository does not offer containerd: %q, %v", out, err)
	}
	// Every host has its own host key.
	keys := map[string]string{}
	for _, h := range l.Hosts() {
		out, err := l.Exec(ctx, h.Name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
		if err != nil {
			t.Fatal(err)
		}
		k := strings.Fields(out)[1]
		if other, dup := keys[k]; dup {
			t.Errorf("%s and %s share a host key", h.Name, other)
		}
		keys[k] = h.Name
	}

	// Kill + Start: same disk, same host key, sshd answers again.
	if err := l.Kill(ctx, "cp-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Dial(ctx, "cp-b"); err == nil {
		t.Error("ssh into a killed host succeeded")
	}
	t0 := time.Now()
	if err := l.Start(ctx, "cp-b"); err != nil {
		t.Fatal(err)
	}
	t.Logf("start after kill took %s", time.Since(t0))
	if got := hostname("cp-b"); got != "cp-b" {
		t.Errorf("after restart: hostname %q", got)
	}
	checkNode("cp-b") // the prep unit ran again at boot

	// Recreate: new container, new host key, known_hosts updated.
	before, _ := os.ReadFile(l.KnownHostsFile())
	t0 = time.Now()
	if err := l.Recreate(ctx, "cp-c"); err != nil {
		t.Fatal(err)
	}
	t.Logf("recreate took %s", time.Since(t0))
	after, _ := os.ReadFile(l.KnownHostsFile())
	if string(before) == string(after) {
		t.Error("known_hosts unchanged after Recreate")
	}
	if got := hostname("cp-c"); got != "cp-c" {
		t.Errorf("after recreate: hostname %q", got)
	}
	// A fresh disk and a fresh containerd volume, prepared as a node again.
	if out, err := l.Exec(ctx, "cp-c", "sh", "-c", "ls /var/lib/containerd"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("recreated cp-c still has containerd data: %q, %v", out, err)
	}
	checkNode("cp-c")

	checkEverything(ctx, t, l)
}

// labObjects lists docker objects named with the lab prefix.
func labObjects(t *testing.T) string {
	var left []string
	d := docker{}
	for _, args := range [][]string{
		{"ps", "-a", "--format", "{{.Names}}"},
		{"network", "ls", "--format", "{{.Name}}"},
		{"volume", "ls", "--format", "{{.Name}}"},
	} {
		out, err := d.run(context.Background(), nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range strings.Fields(out) {
			if isLabName(n) {
				left = append(left, n)
			}
		}
	}
	return strings.Join(left, " ")
}

// checkEverything checks each property of the bastion, IPv6 and mirror hosts the access e2e tests
// rely on.
func checkEverything(ctx context.Context, t *testing.T, l *Lab) {
	run := func(host, user, cmd, stdin string) (string, error) {
		t.Helper()
		c, err := l.DialAs(ctx, host, user)
		if err != nil {
			return "", err
		}
		defer c.Close()
		s, err := c.NewSession()
		if err != nil {
			return "", err
		}
		defer s.Close()
		var out, errb bytes.Buffer
		s.Stdout, s.Stderr, s.Stdin = &out, &errb, strings.NewReader(stdin)
		if err := s.Run(cmd); err != nil {
			return out.String(), fmt.Errorf("%s@%s %q: %w: %s", user, host, cmd, err, errb.String())
		}
		return strings.TrimSpace(out.String()), nil
	}
	must := func(host, user, cmd, stdin string) string {
		t.Helper()
		out, err := run(host, user, cmd, stdin)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Every host: SSH as root (through the bastion for in-*), hostname right.
	for _, h := range l.Hosts() {
		if got := must(h.Name, "root", "hostname", ""); got != h.Name {
			t.Errorf("%s: hostname %q", h.Name, got)
		}
	}
	// sudo: hactl passwordless; hactlpw needs the password (refused without it, accepted on stdin).
	for _, h := range []string{"cp-a", "in-b", "v6-c", "bastion"} {
		if got := must(h, SudoUser, "sudo -n id -u", ""); got != "0" {
			t.Errorf("%s: sudo -n id -u as %s = %q", h, SudoUser, got)
		}
		if out, err := run(h, SudoPasswordUser, "sudo -n true", ""); err == nil {
			t.Errorf("%s: sudo -n as %s worked (%q); want a password to be required", h, SudoPasswordUser, out)
		}
		if got := must(h, SudoPasswordUser, "sudo -S -p '' id -u", l.SudoPassword()+"\n"); got != "0" {
			t.Errorf("%s: sudo -S with the password as %s = %q", h, SudoPasswordUser, got)
		}
		if out, err := run(h, SudoPasswordUser, "sudo -S -p '' id -u", "wrong\n"); err == nil {
			t.Errorf("%s: sudo with a wrong password worked: %q", h, out)
		}
	}
	if b, err := os.ReadFile(l.SudoPasswordFile()); err != nil || string(b) != l.SudoPassword() {
		t.Errorf("sudo-password file: %q, %v", b, err)
	} else if st, _ := os.Stat(l.SudoPasswordFile()); st.Mode().Perm() != 0o600 {
		t.Errorf("sudo-password mode %v", st.Mode())
	}

	// in-*: no TCP connection from this machine; the bastion reaches them.
	for _, n := range []string{"in-a", "in-b", "in-c"} {
		h, _ := l.Host(n)
		c, err := net.DialTimeout("tcp", net.JoinHostPort(h.Address, "22"), 3*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("%s (%s): direct TCP connect from this machine succeeded", n, h.Address)
		} else {
			t.Logf("%s: direct connect fails as it should: %v", n, err)
		}
	}
	// IPv6: straight SSH to [addr]:22 with the known_hosts entry under the bare address; no IPv4 left.
	for _, n := range []string{"v6-a", "v6-b", "v6-c"} {
		h, _ := l.Host(n)
		c, err := dialSSH(ctx, h.Address, l.signer, l.KnownHostsFile())
		if err != nil {
			t.Fatalf("ssh [%s]:22: %v", h.Address, err)
		}
		c.Close()
		if out := must(n, "root", "ip -4 -o addr show scope global", ""); out != "" {
			t.Errorf("%s still has IPv4 addresses: %s", n, out)
		}
	}
	kh, _ := os.ReadFile(l.KnownHostsFile())
	for _, want := range []string{"\nfd00:db8:28::11 ", "\n172.29.0.12 ", "\n" + BastionAddress + " ", "\n" + MirrorAddress + " "} {
		if !strings.Contains("\n"+string(kh), want) {
			t.Errorf("known_hosts lacks a line starting %q", want[1:])
		}
	}

	// Mirror: the tarball's sha256 matches from a member host, an in-* host and an IPv6 host.
	tb, err := l.EtcdTarball()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(l.Dir(), TarballSHA256File)); strings.TrimSpace(string(b)) != tb.SHA256 {
		t.Errorf("%s = %q, want %s", TarballSHA256File, b, tb.SHA256)
	}
	for host, url := range map[string]string{"cp-b": tb.URL, "in-c": tb.InternalURL, "v6-a": tb.IPv6URL} {
		got := must(host, "root", "curl -fsS "+url+" | sha256sum | cut -d' ' -f1", "")
		if got != tb.SHA256 {
			t.Errorf("%s: curl %s | sha256sum = %s, want %s", host, url, got, tb.SHA256)
		}
	}
	if got := must("cp-a", "root", "curl -fsS "+strings.TrimSuffix(tb.URL, tb.Name)+"SHA256SUMS", ""); got != tb.SHA256+"  "+tb.Name {
		t.Errorf("SHA256SUMS = %q", got)
	}
	if got := must("cp-a", "root", "curl -fsS "+tb.URL+" | tar -tz | sort | tr '\\n' ' '", ""); got != "etcd-"+EtcdVersion+"-linux-"+runtime.GOARCH+"/ "+
		"etcd-"+EtcdVersion+"-linux-"+runtime.GOARCH+"/etcd etcd-"+EtcdVersion+"-linux-"+runtime.GOARCH+"/etcdctl etcd-"+EtcdVersion+"-linux-"+runtime.GOARCH+"/etcdutl" {
		t.Errorf("tarball entries: %q", got)
	}
	// Specs: every variant written, each loads strictly.
	for _, v := range Variants() {
		b, err := os.ReadFile(l.VariantSpecPath(v))
		if err != nil {
			t.Errorf("spec %s: %v", v, err)
			continue
		}
		var c v1alpha1.Cluster
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			t.Errorf("spec %s: %v", v, err)
		}
		if v == VariantDownload && (c.Spec.Etcd.Download == nil || c.Spec.Etcd.Download.SHA256 != tb.SHA256 || c.Spec.Etcd.Download.URL != tb.URL) {
			t.Errorf("download spec: %+v", c.Spec.Etcd)
		}
	}

	// Kill + Start an in-* host and a v6 host: isolation and IPv6-only survive the reboot.
	for _, n := range []string{"in-a", "v6-b"} {
		if err := l.Kill(ctx, n); err != nil {
			t.Fatal(err)
		}
		if err := l.Start(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := l.Host("in-a")
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(h.Address, "22"), 3*time.Second); err == nil {
		c.Close()
		t.Error("in-a reachable directly after a restart")
	}
	if out := must("v6-b", "root", "ip -4 -o addr show scope global", ""); out != "" {
		t.Errorf("v6-b has IPv4 after a restart: %s", out)
	}
	// Recreate the mirror: it serves again.
	if err := l.Recreate(ctx, MirrorHost); err != nil {
		t.Fatal(err)
	}
	if got := must("cp-c", "root", "curl -fsS "+tb.URL+" | sha256sum | cut -d' ' -f1", ""); got != tb.SHA256 {
		t.Errorf("after recreate: %s", got)
	}
}
