// Package lab is hactl's end-to-end lab: real hosts (systemd + sshd containers built from Debian's
// archive) on a private docker network, an SSH key pair and known_hosts for them, and cluster specs
// that point hactl at them. e2e tests' TestMain, `make demo` (via e2e/cmd/hactl-lab) and benchmarks
// all use it; hactl itself knows nothing about the lab and is configured only through the spec.
//
// The recipe is shared/LAB.md's, verified on the project's machines: hosts run
// /lib/systemd/systemd as PID 1 with --cgroupns=host, the host cgroupfs, tmpfs /run and the
// SYS_ADMIN, NET_ADMIN, NET_RAW and SYS_PTRACE capabilities (not --privileged, which fails there). Every docker
// object is named with the "hactl-lab" prefix so Down is exact. Docker commands are logged to
// Options.Debugf so a failing test can be replayed by hand.
//
// Beyond the etcd members, a lab can have (each only when asked, see Options): a bastion with
// hosts behind it on an internal network (in-a/b/c), IPv6-only hosts (v6-a/b/c) and an HTTP mirror
// serving an etcd release tarball, and an object store (MinIO) for backups. Every host has the non-root users SudoUser (passwordless sudo)
// and SudoPasswordUser (sudo with a per-lab password). Specs for each access mode are written
// next to cluster-3.yaml (see Variant).
//
// Requirements: root, docker and debootstrap (hack/ensure-docker.sh), and for the specs to be
// usable the etcd binaries in <repo>/bin (hack/build-etcd.sh).
package lab

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ModulePath is the root module's path; the repository root is the directory whose go.mod declares it.
const ModulePath = "github.com/hactl/hactl"

// Options configure a lab. The zero value is usable: a 3-member lab in <repo>/.lab, quiet.
type Options struct {
	// Members is the number of etcd hosts to start: 3 (cp-a, cp-b, cp-c) or 5 (plus etcd-d,
	// etcd-e). Default 3.
	Members int
	// RepoRoot is the repository root (default: the nearest directory at or above the working
	// directory whose go.mod declares ModulePath).
	RepoRoot string
	// Dir is the lab directory holding the key pair, known_hosts, specs and hactl state dirs
	// (default <RepoRoot>/.lab). Made absolute.
	Dir string
	// BinDir holds etcd, etcdctl and etcdutl for the specs (default <RepoRoot>/bin). Made absolute.
	BinDir string
	// ReadyTimeout bounds how long one host may take to boot (systemd running or degraded, sshd
	// answering with its recorded host key). Default 2 minutes.
	ReadyTimeout time.Duration
	// Bastion adds the bastion (BastionAddress on the lab network, also on InternalNetworkName)
	// and in-a, in-b, in-c on the internal network only, reachable from this machine only through
	// the bastion; cluster-bastion.yaml reaches them with spec.ssh.bastion.
	Bastion bool
	// InternalNetwork adds the internal network (InternalNetworkName) without hosts of its own, for
	// tests that give hosts a second interface on it (ConnectNetwork, spec.hosts[*].privateAddress).
	// Bastion implies it.
	InternalNetwork bool
	// IPv6 adds the IPv6 network IPv6NetworkName and the IPv6-only hosts v6-a, v6-b, v6-c;
	// cluster-ipv6.yaml lists them by IPv6 address.
	IPv6 bool
	// Mirror adds the mirror host (MirrorAddress, zone az-c; also on the internal and IPv6
	// networks when those exist) serving the etcd release tarball built from BinDir over HTTP on
	// MirrorPort (see Lab.EtcdTarball); cluster-download.yaml installs etcd from it.
	Mirror bool
	// ObjectStore adds the object store host (ObjectStoreAddress, zone az-c) running the real
	// MinIO server (bin/minio, `make minio-bin`) with the bucket ObjectStoreBucket and a backup
	// access key created by the lab (see Lab.ObjectStore); every spec the lab writes then has
	// spec.backup (BackupSpec). Off by default: other suites and `make demo` don't pay for it.
	ObjectStore bool
	// Kubernetes makes cp-a/b/c Kubernetes nodes (see Host.Kube) and gives the specs
	// spec.kubernetes (WithKubernetes): hactl bootstrap then builds the control plane. It implies
	// Mirror (the nodes install containerd and the other runtime packages from the mirror's apt
	// repository, as from a site's package mirror).
	Kubernetes bool
	// Workers adds the worker nodes w-a, w-b, w-c (zones az-a, az-b, az-c) to the lab and to the
	// specs; it implies Kubernetes.
	Workers bool
	// Spares adds the spare host spare-c (SpareHosts; zone az-c, no roles, nothing installed):
	// a machine hactl-operator may move an etcd member onto. The lab's specs do not list it; a
	// test adds it to spec.etcd.spares as a user would.
	Spares bool
	// KeepOnFailure leaves the containers and network in place when Up fails (for debugging);
	// by default a failed Up removes everything it created.
	KeepOnFailure bool
	// Logf receives progress lines (one per step and host); nil discards them.
	Logf LogFunc
	// Debugf receives every docker command, shell-quoted, before it runs; nil discards them.
	Debugf LogFunc
}

// withDefaults resolves the defaults and makes paths absolute.
func (o Options) withDefaults() (Options, error) {
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Members != 3 && o.Members != 5 {
		return o, fmt.Errorf("lab options: members must be 3 or 5, got %d", o.Members)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.Workers {
		o.Kubernetes = true
	}
	if o.Kubernetes {
		o.Mirror = true
	}
	if o.RepoRoot == "" && (o.Dir == "" || o.BinDir == "") {
		wd, err := os.Getwd()
		if err != nil {
			return o, fmt.Errorf("lab options: %w", err)
		}
		if o.RepoRoot, err = FindRepoRoot(wd); err != nil {
			return o, fmt.Errorf("lab options: %w", err)
		}
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(o.RepoRoot, ".lab")
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RepoRoot, "bin")
	}
	var err error
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return o, fmt.Errorf("lab options: %w", err)
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return o, fmt.Errorf("lab options: %w", err)
	}
	return o, nil
}

// FindRepoRoot returns the nearest directory at or above start whose go.mod declares ModulePath.
func FindRepoRoot(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
					if strings.Trim(fields[1], `"`) == ModulePath {
						f.Close()
						return dir, nil
					}
					break
				}
			}
			f.Close()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod declaring module %s at or above %s", ModulePath, start)
		}
		dir = parent
	}
}

// Lab is a running lab. Its methods are safe for concurrent use.
type Lab struct {
	opts   Options
	d      docker
	image  string
	hosts  []Host
	signer ssh.Signer
	pub    []byte

	mu       sync.Mutex          // guards hostKeys and the known_hosts file
	hostKeys map[string][]string // host name -> known_hosts lines

	sudoPassword string                      // SudoPasswordUser's password
	tarballOnce  func() (EtcdTarball, error) // nil without Options.Mirror
	objStore     *ObjectStore                // nil until the object store host is set up; guarded by mu
}

// starter brings a Lab's hosts up: Up's steps (up: the lab directory, specs, image, networks, then
// provision), starting a host's container and setting it up (startHost: systemd, SSH keys and users,
// the mirror, the object store), recording host keys (writeKnownHosts) and waiting for SSH logins
// (waitSSH). Up, Recreate and Start use it; the e2e suites use only the Lab's handle methods. It
// embeds the *Lab it fills in (image, signer, pub, hostKeys, sudoPassword, objStore) and holds nothing
// else.
type starter struct{ *Lab }

// Up starts a fresh lab and returns once every host accepts an SSH login from this machine with
// host-key checking on (through the bastion for in-*). Steps: remove leftovers of any earlier lab
// (see Down); prepare the lab directory (key pair kept across runs, known_hosts rewritten, a new
// sudo password, specs written, the hactl state dirs state-* and admin.conf removed because they
// describe the previous hosts, specs of variants not enabled removed); build or reuse the host image
// (EnsureImage) while the mirror's tarball is built; create the networks; start the hosts in
// parallel, each with fresh SSH host keys and the lab's authorized key for root, SudoUser and
// SudoPasswordUser; record their host keys; verify SSH. On failure everything created is removed
// unless opts.KeepOnFailure. Typical durations: 3 hosts about 15 s, plus about 3 minutes the first
// time the image is built.
func Up(ctx context.Context, opts Options) (*Lab, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	hosts, err := hostsFor(o)
	if err != nil {
		return nil, err
	}
	l := newLab(o, hosts)
	start := time.Now()
	o.Logf.printf("lab: up with %d hosts in %s", len(hosts), o.Dir)
	if err := (starter{l}).up(ctx); err != nil {
		if !o.KeepOnFailure {
			// Clean up even if ctx is already cancelled.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if derr := DownWithLog(cctx, o.Debugf); derr != nil {
				err = errors.Join(err, fmt.Errorf("clean up after failed up: %w", derr))
			}
		}
		return nil, fmt.Errorf("lab up: %w", err)
	}
	o.Logf.printf("lab: %d hosts up in %s", len(hosts), time.Since(start).Round(100*time.Millisecond))
	return l, nil
}

// newLab returns the Lab of hosts with options o (defaulted), its mirror tarball built lazily.
func newLab(o Options, hosts []Host) *Lab {
	l := &Lab{opts: o, d: docker{debugf: o.Debugf}, hosts: hosts, hostKeys: map[string][]string{}}
	if o.Mirror {
		l.tarballOnce = sync.OnceValues(func() (EtcdTarball, error) {
			start := time.Now()
			path, sum, err := BuildEtcdTarball(o.BinDir, o.Dir)
			if err != nil {
				return EtcdTarball{}, err
			}
			mirror, _ := l.Host(MirrorHost)
			o.Logf.printf("lab: etcd tarball %s ready in %s", path, time.Since(start).Round(100*time.Millisecond))
			return tarballURLs(EtcdTarball{Name: filepath.Base(path), Path: path, SHA256: sum}, mirror), nil
		})
	}
	return l
}

func (l starter) up(ctx context.Context) error {
	o := l.opts
	if out, err := l.d.run(ctx, nil, "ps", "-a", "--filter", "name=^"+Prefix, "--format", "{{.Names}}"); err == nil && strings.TrimSpace(out) != "" {
		o.Logf.printf("lab: removing the previous lab (%s) and its hactl state dirs: the old clusters and their CAs are discarded",
			strings.Join(strings.Fields(out), ", "))
	}
	if err := DownWithLog(ctx, o.Debugf); errors.Is(err, ErrStaleEndpoints) {
		o.Logf.printf("lab: warning: %v", err)
	} else if err != nil {
		return fmt.Errorf("remove leftovers: %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	if o.Kubernetes {
		if err := checkInotify(procInotifyDir); err != nil {
			return err
		}
		if _, err := writeKubeNodeInit(o.Dir); err != nil {
			return err
		}
	}
	// Every hactl state dir of the previous lab (state-3, state-5, the variants', and any a test
	// created, e.g. state-dr): its clusters are gone with the hosts. A fixed list left a test's own
	// state dir behind, and the next run took the old cluster for a live one.
	stateDirs, err := filepath.Glob(filepath.Join(o.Dir, "state-*"))
	if err != nil {
		return fmt.Errorf("reset hactl state dirs: %w", err)
	}
	// The previous lab's Kubernetes cluster is gone too: its admin.conf (KubeUp writes a new one).
	stateDirs = append(stateDirs, filepath.Join(o.Dir, kubeconfigFile))
	for _, sd := range stateDirs {
		if err := os.RemoveAll(sd); err != nil {
			return fmt.Errorf("reset hactl state dir: %w", err)
		}
	}
	if l.signer, l.pub, err = loadOrCreateKey(filepath.Join(o.Dir, keyFile)); err != nil {
		return err
	}
	if err := writeFileAtomic(l.KnownHostsFile(), nil, 0o644); err != nil {
		return fmt.Errorf("reset known_hosts: %w", err)
	}
	if l.sudoPassword, err = newPassword(); err != nil {
		return err
	}
	if err := writeFileAtomic(l.SudoPasswordFile(), []byte(l.sudoPassword), 0o600); err != nil {
		return fmt.Errorf("write sudo password: %w", err)
	}
	variants := l.variants()
	var static []Variant
	for _, v := range variants {
		if v != VariantDownload {
			static = append(static, v)
		}
	}
	if !o.ObjectStore { // the previous lab's object store credentials are stale
		for _, f := range []string{objectStoreRootFile, ObjectStoreEnvFile} {
			if err := os.Remove(filepath.Join(o.Dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove stale object store credentials: %w", err)
			}
		}
	}
	for _, v := range Variants() {
		if !slices.Contains(variants, v) {
			if err := os.Remove(filepath.Join(o.Dir, variantFileName(v))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove stale spec: %w", err)
			}
		}
	}
	so := specOpts{backup: o.ObjectStore, kube: o.Kubernetes, workers: o.Workers}
	if o.Kubernetes {
		probe, err := ensureProbeArchive(ctx, o)
		if err != nil {
			return err
		}
		so.apps = []string{probe}
	}
	if _, err := writeSpecs(o.Dir, o.BinDir, so, static...); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(o.BinDir, "etcd")); err != nil {
		if o.Mirror {
			return fmt.Errorf("the mirror serves a tarball of %s/etcd, etcdctl and etcdutl: %w (run hack/build-etcd.sh)", o.BinDir, err)
		}
		o.Logf.printf("lab: note: %s/etcd is missing; run hack/build-etcd.sh before using the specs", o.BinDir)
	}
	if o.Mirror {
		go l.tarballOnce() // in parallel with the image and the hosts; the mirror host waits for it
	}
	if l.image, err = EnsureImage(ctx, o); err != nil {
		return err
	}
	if err := ensureNetworks(ctx, l.d, networksFor(o)); err != nil {
		return err
	}
	if err := l.provision(ctx, l.hosts); err != nil {
		return err
	}
	if o.Mirror {
		t, err := l.EtcdTarball()
		if err != nil {
			return err
		}
		if _, err := writeVariantSpec(VariantDownload, o.Dir, o.BinDir, t.Download(t.URL), o.ObjectStore); err != nil {
			return err
		}
	}
	return nil
}

// variants returns the spec variants this lab serves.
func (l starter) variants() []Variant {
	vs := []Variant{VariantSudo, VariantSudoPassword}
	if l.opts.Bastion {
		vs = append(vs, VariantBastion)
	}
	if l.opts.IPv6 {
		vs = append(vs, VariantIPv6)
	}
	if l.opts.Mirror {
		vs = append(vs, VariantDownload)
	}
	return vs
}

// newPassword returns a random password of 24 characters from [A-Za-z0-9_-].
func newPassword() (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate sudo password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// provision starts fresh containers for hosts in parallel, records their host keys in
// known_hosts and verifies an SSH login into each.
func (l starter) provision(ctx context.Context, hosts []Host) error {
	err := forEach(hosts, func(h Host) error {
		lines, err := l.startHost(ctx, h)
		if err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
		l.mu.Lock()
		l.hostKeys[h.Name] = lines
		l.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	if err := l.writeKnownHosts(); err != nil {
		return err
	}
	return forEach(hosts, func(h Host) error { return l.waitSSH(ctx, h) })
}

// containerFlags are LAB.md step 3's docker run flags (verified), for every host, plus SYS_PTRACE:
// root on a real machine may read every process's /proc/PID/fd, so `ss -p` names the owner of a
// socket (hactl checks that HAProxy itself, running as user haproxy, listens on its port).
var containerFlags = []string{
	"--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
	"--tmpfs", "/run", "--tmpfs", "/run/lock",
	"--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW", "--cap-add", "SYS_PTRACE",
	"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
}

// containerCommands returns the docker commands (argument lists) that start h's container from
// image: `docker run -d` for a host on one network; `docker create`, one `docker network connect`
// per further network, `docker start` otherwise (so every interface exists when systemd boots).
// Addresses are pinned (--ip, --ip6) so they survive restarts.
func containerCommands(h Host, image, initPath string) [][]string {
	addrFlags := func(a Attachment) []string {
		var f []string
		if a.IPv4 != "" {
			f = append(f, "--ip", a.IPv4)
		}
		if a.IPv6 != "" {
			f = append(f, "--ip6", a.IPv6)
		}
		return f
	}
	first := h.Networks[0]
	args := []string{"--name", h.Container, "--hostname", h.Name, "--network", first.Network}
	args = append(args, addrFlags(first)...)
	init := "/lib/systemd/systemd"
	if h.KubeNode() {
		args = append(args, kubeNodeFlags(h.ContainerdVolume(), initPath)...)
		init = kubeNodeInitPath
	} else {
		args = append(args, containerFlags...)
	}
	for _, v := range h.Volumes {
		args = append(args, "-v", v)
	}
	args = append(args, image, init)
	if len(h.Networks) == 1 {
		return [][]string{append([]string{"run", "-d"}, args...)}
	}
	cmds := [][]string{append([]string{"create"}, args...)}
	for _, a := range h.Networks[1:] {
		c := append([]string{"network", "connect"}, addrFlags(a)...)
		cmds = append(cmds, append(c, a.Network, h.Container))
	}
	return append(cmds, []string{"start", h.Container})
}

// netUnit is the systemd unit (in hosts that need one) that gives the host its network shape at
// every boot, before sshd starts: docker recreates the container's network namespace on each start.
const netUnit = "hactl-lab-net.service"

// netShapeCommands returns the shell commands netUnit runs on h, or nil when h needs none:
//   - a host behind the bastion (Jump set) rejects everything from this machine's address on the
//     internal network (InternalGateway) and from outside that network, as "host unreachable", so
//     this machine can reach it only through the bastion;
//   - an IPv6-only host removes its global IPv4 addresses.
func netShapeCommands(h Host) []string {
	var cmds []string
	if h.Jump != "" {
		rej := " -j REJECT --reject-with icmp-host-unreachable"
		cmds = append(cmds,
			"iptables -w -N HACTL-LAB-ISOLATE 2>/dev/null || iptables -w -F HACTL-LAB-ISOLATE",
			"iptables -w -A HACTL-LAB-ISOLATE -s "+InternalGateway+rej,
			"iptables -w -A HACTL-LAB-ISOLATE ! -s "+InternalSubnet+rej,
			"iptables -w -C INPUT -i eth0 -j HACTL-LAB-ISOLATE 2>/dev/null || iptables -w -I INPUT 1 -i eth0 -j HACTL-LAB-ISOLATE",
		)
	}
	if h.IPv6Only {
		cmds = append(cmds, "ip -4 addr flush scope global")
	}
	return cmds
}

// netUnitText returns netUnit's text for h ("" when h needs none).
func netUnitText(h Host) string {
	cmds := netShapeCommands(h)
	if len(cmds) == 0 {
		return ""
	}
	return bootUnitText("hactl lab: network shape of this host", "Before=network.target ssh.service", cmds)
}

// bootUnitText returns a oneshot unit run at every boot (multi-user.target): /bin/sh -ec with
// cmds joined by "; ", ordered by the order line (e.g. "Before=network.target").
func bootUnitText(description, order string, cmds []string) string {
	return fmt.Sprintf(`[Unit]
Description=%s
%s

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec %s

[Install]
WantedBy=multi-user.target
`, description, order, systemdQuote(strings.Join(cmds, "; ")))
}

// systemdQuote quotes s as one argument of a unit's command line (systemd.service(5), "Command
// lines"): double quotes, with backslash, double quote, "%" and "$" escaped.
func systemdQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$")
	return `"` + r.Replace(s) + `"`
}

// hostSetupScript is run in h (docker exec, sh -c) once systemd is up. Standard input: the lab's
// public key line, then SudoPasswordUser's password line (so the password is never on a command
// line). It gives the host fresh SSH host keys, installs the key for root, SudoUser and
// SudoPasswordUser, sets the password, installs and starts netUnit when h needs it, restarts
// sshd, and prints the host's public host keys.
func hostSetupScript(h Host) string {
	var b strings.Builder
	fmt.Fprintf(&b, `set -e
umask 022
IFS= read -r pub
IFS= read -r pw
rm -f /etc/ssh/ssh_host_*
ssh-keygen -A >/dev/null
for u in root %[1]s %[2]s; do
	home=$(getent passwd "$u" | cut -d: -f6)
	mkdir -p "$home/.ssh"
	printf '%%s\n' "$pub" > "$home/.ssh/authorized_keys"
	chmod 700 "$home/.ssh"
	chmod 600 "$home/.ssh/authorized_keys"
	chown -R "$u:" "$home/.ssh"
done
printf '%[2]s:%%s\n' "$pw" | chpasswd
`, SudoUser, SudoPasswordUser)
	if unit := netUnitText(h); unit != "" {
		fmt.Fprintf(&b, "cat > /etc/systemd/system/%s <<'EOF'\n%sEOF\n", netUnit, unit)
		fmt.Fprintf(&b, "systemctl daemon-reload\nsystemctl enable --now %s >/dev/null\n", netUnit)
	}
	b.WriteString(`systemctl restart ssh
systemctl is-active ssh >/dev/null
cat /etc/ssh/ssh_host_*_key.pub
`)
	return b.String()
}

// startHost runs the container of h, waits for systemd, sets the host up (hostSetupScript; the
// mirror's HTTP server on the mirror) and returns the known_hosts lines of its host keys.
func (l starter) startHost(ctx context.Context, h Host) ([]string, error) {
	for _, args := range containerCommands(h, l.image, filepath.Join(l.opts.Dir, kubeNodeInitFile)) {
		if _, err := l.d.run(ctx, nil, args...); err != nil {
			return nil, fmt.Errorf("start container: %w", err)
		}
	}
	if err := l.waitSystemd(ctx, h); err != nil {
		return nil, err
	}
	l.opts.Debugf.printf("# standard input of the next command: %s.pub, then the sudo password of %s", l.IdentityFile(), SudoPasswordUser)
	stdin := strings.TrimRight(string(l.pub), "\n") + "\n" + l.sudoPassword + "\n"
	script := hostSetupScript(h)
	if h.KubeNode() {
		script = kubeNodeSetup(l.aptSources()) + script
	}
	pubs, err := l.d.run(ctx, strings.NewReader(stdin), "exec", "-i", h.Container, "sh", "-c", script)
	if err != nil {
		return nil, fmt.Errorf("set the host up: %w", err)
	}
	if h.Name == MirrorHost && l.tarballOnce != nil {
		if err := l.setupMirror(ctx, h); err != nil {
			return nil, err
		}
	}
	if h.Name == ObjectStoreHost && l.opts.ObjectStore {
		if err := l.setupObjectStore(ctx, h); err != nil {
			return nil, err
		}
	}
	// All of the host's keys (ed25519, ecdsa, rsa) are recorded, as ssh-keyscan would, so hactl's
	// checking passes whichever host key algorithm its client negotiates.
	lines, err := knownHostsLines(h.Address, 22, pubs)
	if err != nil {
		return nil, err
	}
	via := ""
	if h.Jump != "" {
		via = ", through " + h.Jump
	}
	l.opts.Logf.printf("lab: %s (%s, %s%s) is up", h.Name, h.Address, h.Zone, via)
	return lines, nil
}

// waitSystemd waits until `systemctl is-system-running` reports running or degraded (failing
// fast when the container stops), then until sshd is active.
func (l starter) waitSystemd(ctx context.Context, h Host) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.ReadyTimeout)
	defer cancel()
	quiet := docker{} // polling is not logged command by command
	l.opts.Debugf.printf("$ docker exec %s systemctl is-system-running  # polled until running|degraded", h.Container)
	last := ""
	for {
		out, err := quiet.run(ctx, nil, "exec", h.Container, "systemctl", "is-system-running")
		last = strings.TrimSpace(out)
		if last == "running" || last == "degraded" {
			break
		}
		if err != nil {
			if st, ierr := quiet.run(ctx, nil, "inspect", "-f", "{{.State.Status}}", h.Container); ierr == nil && strings.TrimSpace(st) != "running" {
				logs, _ := quiet.run(context.WithoutCancel(ctx), nil, "logs", "--tail", "30", h.Container)
				return fmt.Errorf("container %s is %s: %s", h.Container, strings.TrimSpace(st), logs)
			}
		}
		select {
		case <-ctx.Done():
			failed, _ := quiet.run(context.WithoutCancel(ctx), nil, "exec", h.Container, "systemctl", "--failed", "--no-legend")
			return fmt.Errorf("systemd did not reach running within %s (last state %q; failed units: %s): %w",
				l.opts.ReadyTimeout, last, strings.TrimSpace(failed), ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
	if last == "degraded" {
		failed, _ := quiet.run(ctx, nil, "exec", h.Container, "systemctl", "--failed", "--no-legend")
		l.opts.Logf.printf("lab: %s: systemd is degraded; failed units: %s", h.Name, strings.TrimSpace(failed))
	}
	if out, err := l.Exec(ctx, h.Name, "systemctl", "is-active", "ssh"); err != nil {
		return fmt.Errorf("sshd is not active (%s): %w", strings.TrimSpace(out), err)
	}
	return nil
}

// sshAttemptTimeout bounds one `hostname` over an established SSH connection in waitSSH.
const sshAttemptTimeout = 15 * time.Second

// waitSSH retries an SSH login (host-key checking on) until it succeeds and `hostname` answers
// h.Name, or ReadyTimeout passes.
func (l starter) waitSSH(ctx context.Context, h Host) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.ReadyTimeout)
	defer cancel()
	var last error
	for {
		c, err := l.DialAs(ctx, h.Name, "root")
		if err == nil {
			// One attempt is bounded: a host that dies between the handshake and the answer (the
			// container killed from outside) would otherwise block this read forever.
			actx, cancel := context.WithTimeout(ctx, sshAttemptTimeout)
			name, rerr := sshRunContext(actx, c, "hostname")
			cancel()
			c.Close()
			if rerr == nil && name == h.Name {
				return nil
			}
			err = fmt.Errorf("ssh %s: hostname = %q, %v", h.Address, name, rerr)
		}
		last = err
		// A host key mismatch will not fix itself.
		if ke := (*knownhosts.KeyError)(nil); errors.As(err, &ke) && len(ke.Want) > 0 {
			return fmt.Errorf("verify ssh login to %s: %w", h.Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("verify ssh login to %s within %s: %w", h.Name, l.opts.ReadyTimeout, errors.Join(last, ctx.Err()))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// writeKnownHosts rewrites the lab's known_hosts from the recorded host keys, in host order.
func (l starter) writeKnownHosts() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, h := range l.hosts {
		for _, line := range l.hostKeys[h.Name] {
			b.WriteString(line + "\n")
		}
	}
	if err := writeFileAtomic(l.KnownHostsFile(), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write known_hosts: %w", err)
	}
	return nil
}

// Down removes the lab: every docker container, network (hactl-lab, hactl-lab-internal,
// hactl-lab-v6) and volume whose name is "hactl-lab" or starts with "hactl-lab-", and nothing else. The host image stays cached and the lab directory
// stays. Usable without a *Lab to clean up after a crashed run; removing nothing is not an error.
func Down(ctx context.Context) error { return DownWithLog(ctx, nil) }

// DownWithLog is Down with every docker command logged to debugf (nil discards).
func DownWithLog(ctx context.Context, debugf LogFunc) error {
	d := docker{debugf: debugf}
	list := func(args ...string) ([]string, error) {
		out, err := d.run(ctx, nil, args...)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, n := range strings.Fields(out) {
			if isLabName(n) {
				names = append(names, n)
			}
		}
		return names, nil
	}
	containers, err := list("ps", "-a", "--format", "{{.Names}}")
	if err != nil {
		return fmt.Errorf("lab down: list containers: %w", err)
	}
	if len(containers) > 0 {
		if _, err := d.run(ctx, nil, append([]string{"rm", "-f", "-v"}, containers...)...); err != nil {
			return fmt.Errorf("lab down: remove containers: %w", err)
		}
	}
	var errs []error
	if nets, err := list("network", "ls", "--format", "{{.Name}}"); err != nil {
		errs = append(errs, fmt.Errorf("list networks: %w", err))
	} else if len(nets) > 0 {
		if err := removeNetworks(ctx, d, nets, containers); err != nil {
			errs = append(errs, fmt.Errorf("remove networks: %w", err))
		}
	}
	if vols, err := list("volume", "ls", "--format", "{{.Name}}"); err != nil {
		errs = append(errs, fmt.Errorf("list volumes: %w", err))
	} else if len(vols) > 0 {
		if _, err := d.run(ctx, nil, append([]string{"volume", "rm", "-f"}, vols...)...); err != nil {
			errs = append(errs, fmt.Errorf("remove volumes: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab down: %w", err)
	}
	return nil
}

// staleEndpointRetries is how often removeNetworks disconnects leftover endpoints and tries again,
// staleEndpointPause apart.
const staleEndpointRetries = 5

var staleEndpointPause = time.Second

// removeNetworks removes the named docker networks. A network whose containers are gone can still
// hold their endpoints for a moment (or for good, after a container died with its shim: "network
// … has active endpoints", moby/moby#17217): each endpoint `docker network inspect` still lists is
// disconnected by force and the removal tried again, up to staleEndpointRetries times
// staleEndpointPause apart; so is an endpoint named after one of the containers just removed
// (removed), which inspect may no longer list. The last error is returned.
func removeNetworks(ctx context.Context, d docker, nets, removed []string) error {
	var err error
	for attempt := 0; ; attempt++ {
		if _, err = d.run(ctx, nil, append([]string{"network", "rm"}, nets...)...); err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "active endpoints") {
			return err
		}
		if attempt == staleEndpointRetries {
			return staleOnly(ctx, d, nets, err)
		}
		for _, n := range nets {
			out, ierr := d.run(ctx, nil, "network", "inspect", "--format", "{{range $id, $c := .Containers}}{{$c.Name}} {{end}}", n)
			if ierr != nil {
				continue // removed by the first attempt, or gone
			}
			eps := strings.Fields(out)
			for _, c := range removed {
				if !slices.Contains(eps, c) {
					eps = append(eps, c)
				}
			}
			for _, ep := range eps {
				_, _ = d.run(ctx, nil, "network", "disconnect", "--force", n, ep) // best effort; the retry says
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(staleEndpointPause):
		}
	}
}

// ErrStaleEndpoints marks a Down that removed every container but left a lab network docker
// would not remove although no container is attached to it any more: the daemon's endpoint count
// is stale (moby/moby#17217, docker 20.10), and only a daemon restart clears it. The network is
// harmless: Up reuses a lab network of the same name (ensureNetworks).
var ErrStaleEndpoints = errors.New("a lab network keeps a stale endpoint count (moby/moby#17217): no container is attached, docker refuses to remove it; the next lab up reuses it, a docker daemon restart removes it")

// staleOnly returns err wrapped in ErrStaleEndpoints when none of nets that still exist has a
// container attached (docker network inspect), else err.
func staleOnly(ctx context.Context, d docker, nets []string, err error) error {
	for _, n := range nets {
		out, ierr := d.run(ctx, nil, "network", "inspect", "--format", "{{len .Containers}}", n)
		if ierr != nil {
			continue // gone
		}
		if strings.TrimSpace(out) != "0" {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrStaleEndpoints, err)
}

// Down removes the lab (see the package-level Down), logging docker commands to Options.Debugf.
func (l *Lab) Down(ctx context.Context) error {
	start := time.Now()
	if err := DownWithLog(ctx, l.opts.Debugf); err != nil {
		return err
	}
	l.opts.Logf.printf("lab: down in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Recreate replaces the named hosts with fresh containers (empty disks and containerd volumes, new
// SSH host keys; a Kubernetes node is prepared again), in
// parallel, records their new host keys in known_hosts and returns once SSH logins work.
func (l *Lab) Recreate(ctx context.Context, names ...string) error {
	var hosts []Host
	for _, n := range names {
		h, err := l.Host(n)
		if err != nil {
			return fmt.Errorf("recreate: %w", err)
		}
		hosts = append(hosts, h)
	}
	err := forEach(hosts, func(h Host) error {
		if _, err := l.d.run(ctx, nil, "rm", "-f", "-v", h.Container); err != nil {
			return err
		}
		vols := []string{h.ContainerdVolume()}
		for _, v := range h.Volumes {
			vols = append(vols, strings.SplitN(v, ":", 2)[0])
		}
		for _, v := range vols { // a named volume outlives its container
			if v == "" {
				continue
			}
			if _, err := l.d.run(ctx, nil, "volume", "rm", "-f", v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recreate: %w", err)
	}
	if err := (starter{l}).provision(ctx, hosts); err != nil {
		return fmt.Errorf("recreate: %w", err)
	}
	return nil
}

// Exec runs args inside host's container (docker exec, as root) and returns its standard output,
// untrimmed. For test assertions only: hactl reaches hosts over SSH. A non-zero exit is a
// *CommandError carrying the standard error; the output is returned as well.
func (l *Lab) Exec(ctx context.Context, host string, args ...string) (string, error) {
	h, err := l.Host(host)
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	out, err := l.d.run(ctx, nil, append([]string{"exec", h.Container}, args...)...)
	if err != nil {
		return out, fmt.Errorf("exec on %s: %w", host, err)
	}
	return out, nil
}

// ConnectNetwork gives running host one more interface: on the lab's docker network (e.g.
// InternalNetworkName) at the pinned address addr (docker network connect). It lasts until the host
// is recreated. For tests of hosts with two networks (spec.hosts[*].privateAddress).
func (l *Lab) ConnectNetwork(ctx context.Context, host, network, addr string) error {
	h, err := l.Host(host)
	if err != nil {
		return fmt.Errorf("connect network: %w", err)
	}
	flag := "--ip"
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
		flag = "--ip6"
	}
	if _, err := l.d.run(ctx, nil, "network", "connect", flag, addr, network, h.Container); err != nil {
		return fmt.Errorf("connect %s to %s at %s: %w", host, network, addr, err)
	}
	return nil
}

// Kill crashes host: docker kill (SIGKILL to the whole container, like pulling the power).
func (l *Lab) Kill(ctx context.Context, host string) error {
	h, err := l.Host(host)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if _, err := l.d.run(ctx, nil, "kill", h.Container); err != nil {
		return fmt.Errorf("kill %s: %w", host, err)
	}
	return nil
}

// Start boots a stopped (killed) host again with its disk and address kept (docker start) and
// returns once sshd answers with the recorded host key. Services enabled on the host start again
// with systemd, as after a reboot.
func (l *Lab) Start(ctx context.Context, host string) error {
	h, err := l.Host(host)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if _, err := l.d.run(ctx, nil, "start", h.Container); err != nil {
		return fmt.Errorf("start %s: %w", host, err)
	}
	if err := (starter{l}).waitSSH(ctx, h); err != nil {
		return fmt.Errorf("start %s: %w", host, err)
	}
	return nil
}

// Dial opens an SSH connection to host as root with the lab key and host-key checking against the
// lab's known_hosts, the way hactl connects; a host behind the bastion is reached through it (as
// SudoUser on the bastion, like cluster-bastion.yaml). The caller closes the client.
func (l *Lab) Dial(ctx context.Context, host string) (*ssh.Client, error) {
	return l.DialAs(ctx, host, "root")
}

// DialAs is Dial logging in as user (e.g. SudoUser, SudoPasswordUser).
func (l *Lab) DialAs(ctx context.Context, host, user string) (*ssh.Client, error) {
	h, err := l.Host(host)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	var jump *ssh.Client
	if h.Jump != "" {
		j, err := l.Host(h.Jump)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", h.Name, err)
		}
		if jump, err = dialSSHAs(ctx, nil, j.Address, SudoUser, l.signer, l.KnownHostsFile()); err != nil {
			return nil, fmt.Errorf("dial %s: jump host %s: %w", h.Name, j.Name, err)
		}
	}
	return dialSSHAs(ctx, jump, h.Address, user, l.signer, l.KnownHostsFile())
}

// Hosts returns the lab's hosts in spec order (a copy).
func (l *Lab) Hosts() []Host {
	out := make([]Host, len(l.hosts))
	for i, h := range l.hosts {
		h.Roles = slices.Clone(h.Roles)
		out[i] = h
	}
	return out
}

// Host returns the lab host named name.
func (l *Lab) Host(name string) (Host, error) {
	for _, h := range l.hosts {
		if h.Name == name {
			h.Roles = slices.Clone(h.Roles)
			return h, nil
		}
	}
	return Host{}, fmt.Errorf("no lab host %q (lab has %d hosts)", name, len(l.hosts))
}

// SpecPath returns the absolute path of the lab's cluster spec with members etcd members
// (<dir>/cluster-3.yaml or cluster-5.yaml). Both are written by Up whatever Options.Members is;
// only the hosts Up started are reachable.
func (l *Lab) SpecPath(members int) string {
	return filepath.Join(l.opts.Dir, specFileName(members))
}

// VariantSpecPath returns the absolute path of variant v's spec, <dir>/cluster-<v>.yaml (see
// Variant). Up writes the specs of the variants its options enable and removes the others.
func (l *Lab) VariantSpecPath(v Variant) string {
	return filepath.Join(l.opts.Dir, variantFileName(v))
}

// SudoPassword returns SudoPasswordUser's sudo password on every host, new for each lab (also in
// SudoPasswordFile). Tests export it as SudoPasswordEnv for cluster-sudopw.yaml.
func (l *Lab) SudoPassword() string { return l.sudoPassword }

// SudoPasswordFile returns the path of <dir>/sudo-password (mode 0600, the password without a
// trailing newline).
func (l *Lab) SudoPasswordFile() string { return filepath.Join(l.opts.Dir, sudoPasswordFile) }

// EtcdTarball returns the etcd release tarball the mirror serves: its local path, sha256 and URLs,
// building it on first use (safe for concurrent use). It fails without Options.Mirror.
func (l *Lab) EtcdTarball() (EtcdTarball, error) {
	if l.tarballOnce == nil {
		return EtcdTarball{}, errors.New("the lab has no mirror (Options.Mirror)")
	}
	return l.tarballOnce()
}

// Dir returns the lab directory (absolute).
func (l *Lab) Dir() string { return l.opts.Dir }

// IdentityFile returns the path of the lab's private SSH key (OpenSSH format, mode 0600).
func (l *Lab) IdentityFile() string { return filepath.Join(l.opts.Dir, keyFile) }

// KnownHostsFile returns the path of the lab's known_hosts file.
func (l *Lab) KnownHostsFile() string { return filepath.Join(l.opts.Dir, knownHostsFile) }

// Image returns the host image reference the lab runs.
func (l *Lab) Image() string { return l.image }

// forEach runs fn for every host concurrently and joins the errors.
func forEach(hosts []Host, fn func(Host) error) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(h)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
