// Package lab is hactl's end-to-end lab: real hosts (systemd + sshd containers built from Debian's
// archive) on a private docker network, an SSH key pair and known_hosts for them, and cluster specs
// that point hactl at them. e2e tests' TestMain, `make demo` (via e2e/cmd/hactl-lab) and benchmarks
// all use it; hactl itself knows nothing about the lab and is configured only through the spec.
//
// The recipe is shared/LAB.md's, verified on the project's machines: hosts run
// /lib/systemd/systemd as PID 1 with --cgroupns=host, the host cgroupfs, tmpfs /run and the
// SYS_ADMIN, NET_ADMIN and NET_RAW capabilities (not --privileged, which fails there). Every docker
// object is named with the "hactl-lab" prefix so Down is exact. Docker commands are logged to
// Options.Debugf so a failing test can be replayed by hand.
//
// Requirements: root, docker and debootstrap (hack/ensure-docker.sh), and for the specs to be
// usable the etcd binaries in <repo>/bin (hack/build-etcd.sh).
package lab

import (
	"bufio"
	"context"
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
}

// Up starts a fresh lab and returns once every host accepts an SSH login from this machine with
// host-key checking on. Steps: remove leftovers of any earlier lab (see Down); prepare the lab
// directory (key pair kept across runs, known_hosts rewritten, specs written, the hactl state dirs
// state-3 and state-5 removed because they describe the previous hosts); build or reuse the host
// image (EnsureImage); create the network; start the hosts in parallel, each with fresh SSH host
// keys and the lab's authorized key; record their host keys; verify SSH. On failure everything
// created is removed unless opts.KeepOnFailure. Typical durations: 3 hosts about 15 s, plus about
// 3 minutes the first time the image is built.
func Up(ctx context.Context, opts Options) (*Lab, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	hosts, err := labHosts(o.Members)
	if err != nil {
		return nil, err
	}
	l := &Lab{opts: o, d: docker{debugf: o.Debugf}, hosts: hosts, hostKeys: map[string][]string{}}
	start := time.Now()
	o.Logf.printf("lab: up with %d hosts in %s", len(hosts), o.Dir)
	if err := l.up(ctx); err != nil {
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

func (l *Lab) up(ctx context.Context) error {
	o := l.opts
	if out, err := l.d.run(ctx, nil, "ps", "-a", "--filter", "name=^"+Prefix, "--format", "{{.Names}}"); err == nil && strings.TrimSpace(out) != "" {
		o.Logf.printf("lab: removing the previous lab (%s) and its hactl state dirs: the old clusters and their CAs are discarded",
			strings.Join(strings.Fields(out), ", "))
	}
	if err := DownWithLog(ctx, o.Debugf); err != nil {
		return fmt.Errorf("remove leftovers: %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	for _, n := range []int{3, 5} {
		if err := os.RemoveAll(filepath.Join(o.Dir, stateDirName(n))); err != nil {
			return fmt.Errorf("reset hactl state dir: %w", err)
		}
	}
	var err error
	if l.signer, l.pub, err = loadOrCreateKey(filepath.Join(o.Dir, keyFile)); err != nil {
		return err
	}
	if err := writeFileAtomic(l.KnownHostsFile(), nil, 0o644); err != nil {
		return fmt.Errorf("reset known_hosts: %w", err)
	}
	if _, err := WriteSpecs(o.Dir, o.BinDir); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(o.BinDir, "etcd")); err != nil {
		o.Logf.printf("lab: note: %s/etcd is missing; run hack/build-etcd.sh before using the specs", o.BinDir)
	}
	if l.image, err = EnsureImage(ctx, o); err != nil {
		return err
	}
	if err := ensureNetwork(ctx, l.d); err != nil {
		return err
	}
	return l.provision(ctx, l.hosts)
}

// provision starts fresh containers for hosts in parallel, records their host keys in
// known_hosts and verifies an SSH login into each.
func (l *Lab) provision(ctx context.Context, hosts []Host) error {
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

// startHost runs the container of h, waits for systemd, gives the host its own SSH host keys and
// the lab's authorized key, and returns the known_hosts lines of its host keys.
func (l *Lab) startHost(ctx context.Context, h Host) ([]string, error) {
	// Flags: LAB.md step 3 (verified), plus name, hostname and the pinned address.
	if _, err := l.d.run(ctx, nil, "run", "-d",
		"--name", h.Container, "--hostname", h.Name,
		"--network", NetworkName, "--ip", h.Address,
		"--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
		"--tmpfs", "/run", "--tmpfs", "/run/lock",
		"--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		l.image, "/lib/systemd/systemd"); err != nil {
		return nil, fmt.Errorf("start container: %w", err)
	}
	if err := l.waitSystemd(ctx, h); err != nil {
		return nil, err
	}
	if _, err := l.Exec(ctx, h.Name, "sh", "-c",
		"rm -f /etc/ssh/ssh_host_* && ssh-keygen -A >/dev/null && systemctl restart ssh && systemctl is-active ssh"); err != nil {
		return nil, fmt.Errorf("regenerate ssh host keys: %w", err)
	}
	l.opts.Debugf.printf("# standard input of the next command: %s.pub", l.IdentityFile())
	if _, err := l.d.run(ctx, strings.NewReader(string(l.pub)), "exec", "-i", h.Container, "sh", "-c",
		"umask 077 && mkdir -p /root/.ssh && chmod 700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys"); err != nil {
		return nil, fmt.Errorf("install authorized key: %w", err)
	}
	// All of the host's keys (ed25519, ecdsa, rsa) are recorded, as ssh-keyscan would, so hactl's
	// checking passes whichever host key algorithm its client negotiates.
	pubs, err := l.Exec(ctx, h.Name, "sh", "-c", "cat /etc/ssh/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_*_key.pub | sort -u")
	if err != nil {
		return nil, fmt.Errorf("read host keys: %w", err)
	}
	lines, err := knownHostsLines(h.Address, 22, pubs)
	if err != nil {
		return nil, err
	}
	l.opts.Logf.printf("lab: %s (%s, %s) is up", h.Name, h.Address, h.Zone)
	return lines, nil
}

// waitSystemd waits until `systemctl is-system-running` reports running or degraded (failing
// fast when the container stops), then until sshd is active.
func (l *Lab) waitSystemd(ctx context.Context, h Host) error {
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

// waitSSH retries an SSH login (host-key checking on) until it succeeds and `hostname` answers
// h.Name, or ReadyTimeout passes.
func (l *Lab) waitSSH(ctx context.Context, h Host) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.ReadyTimeout)
	defer cancel()
	var last error
	for {
		c, err := dialSSH(ctx, h.Address, l.signer, l.KnownHostsFile())
		if err == nil {
			name, rerr := sshRun(c, "hostname")
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
func (l *Lab) writeKnownHosts() error {
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

// ensureNetwork creates the lab network, refusing when another docker network overlaps Subnet.
func ensureNetwork(ctx context.Context, d docker) error {
	want := netip.MustParsePrefix(Subnet)
	out, err := d.run(ctx, nil, "network", "ls", "--format", "{{.Name}}")
	if err != nil {
		return fmt.Errorf("list networks: %w", err)
	}
	names := strings.Fields(out)
	if len(names) > 0 {
		out, err := d.run(ctx, nil, append([]string{"network", "inspect", "--format",
			"{{.Name}}{{range .IPAM.Config}} {{.Subnet}}{{end}}"}, names...)...)
		if err != nil {
			return fmt.Errorf("inspect networks: %w", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			for _, s := range f[1:] {
				p, err := netip.ParsePrefix(s)
				if err != nil || !p.Overlaps(want) {
					continue
				}
				if f[0] == NetworkName && s == Subnet {
					return nil // ours, already there
				}
				return fmt.Errorf("lab subnet %s is taken: docker network %q uses %s; remove that network or free the subnet", Subnet, f[0], s)
			}
		}
	}
	if _, err := d.run(ctx, nil, "network", "create", "--driver", "bridge",
		"--subnet", Subnet, "--ip-range", IPRange, NetworkName); err != nil {
		return fmt.Errorf("create network %s: %w", NetworkName, err)
	}
	return nil
}

// Down removes the lab: every docker container, network and volume whose name is "hactl-lab" or
// starts with "hactl-lab-", and nothing else. The host image stays cached and the lab directory
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
		if _, err := d.run(ctx, nil, append([]string{"network", "rm"}, nets...)...); err != nil {
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

// Down removes the lab (see the package-level Down), logging docker commands to Options.Debugf.
func (l *Lab) Down(ctx context.Context) error {
	start := time.Now()
	if err := DownWithLog(ctx, l.opts.Debugf); err != nil {
		return err
	}
	l.opts.Logf.printf("lab: down in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Recreate replaces the named hosts with fresh containers (empty disks, new SSH host keys), in
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
		_, err := l.d.run(ctx, nil, "rm", "-f", "-v", h.Container)
		return err
	})
	if err != nil {
		return fmt.Errorf("recreate: %w", err)
	}
	if err := l.provision(ctx, hosts); err != nil {
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
	if err := l.waitSSH(ctx, h); err != nil {
		return fmt.Errorf("start %s: %w", host, err)
	}
	return nil
}

// Dial opens an SSH connection to host as root with the lab key and host-key checking against the
// lab's known_hosts, the way hactl connects. The caller closes the client.
func (l *Lab) Dial(ctx context.Context, host string) (*ssh.Client, error) {
	h, err := l.Host(host)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return dialSSH(ctx, h.Address, l.signer, l.KnownHostsFile())
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
