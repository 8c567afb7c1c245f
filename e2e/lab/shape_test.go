package lab

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
)

func TestHostsForDefaultIsUnchanged(t *testing.T) {
	for _, members := range []int{3, 5} {
		hosts, err := hostsFor(Options{Members: members})
		if err != nil {
			t.Fatal(err)
		}
		if len(hosts) != members+2 {
			t.Fatalf("default lab with %d members has %d hosts, want the members and lb-a, lb-b", members, len(hosts))
		}
		for i, h := range hosts {
			wantRoles := []v1alpha1.Role{v1alpha1.RoleEtcd}
			if i >= members {
				wantRoles = []v1alpha1.Role{v1alpha1.RoleLB}
				if h.Name != LBHosts[i-members] {
					t.Errorf("host %d is %s, want %s", i, h.Name, LBHosts[i-members])
				}
			} else if i < 3 {
				wantRoles = cpRoles
			}
			if !slices.Equal(h.Roles, wantRoles) {
				t.Errorf("%s: roles %v, want %v", h.Name, h.Roles, wantRoles)
			}
			if h.KubeNode() || h.ContainerdVolume() != "" {
				t.Errorf("%s: a Kubernetes node (volume %q) in a lab without Options.Kubernetes", h.Name, h.ContainerdVolume())
			}
		}
		for _, h := range hosts {
			if h.Jump != "" || h.IPv6Only || len(h.Networks) != 1 || h.Networks[0] != (Attachment{Network: NetworkName, IPv4: h.Address}) {
				t.Errorf("default host %+v is not a plain lab-network host", h)
			}
		}
		if nets := networksFor(Options{Members: members}); len(nets) != 1 || !reflect.DeepEqual(nets[0].createArgs(),
			[]string{"network", "create", "--driver", "bridge", "--subnet", Subnet, "--ip-range", IPRange, NetworkName}) {
			t.Errorf("default networks: %+v", nets)
		}
	}
}

// Every pinned address lies in its network's subnet and outside the range docker assigns from;
// names, containers and addresses are unique; in-* are on the internal network only.
func TestHostsForEverything(t *testing.T) {
	o := Options{Members: 5, Bastion: true, IPv6: true, Mirror: true}
	hosts, err := hostsFor(o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	want := "cp-a cp-b cp-c etcd-d etcd-e lb-a lb-b bastion in-a in-b in-c v6-a v6-b v6-c mirror"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("hosts = %s, want %s", got, want)
	}
	nets := map[string]netDef{}
	for _, n := range networksFor(o) {
		nets[n.Name] = n
	}
	if !nets[InternalNetworkName].Internal || !nets[IPv6NetworkName].IPv6 || nets[NetworkName].Internal {
		t.Errorf("network flags wrong: %+v", nets)
	}
	seen := map[string]string{}
	unique := func(what, v, host string) {
		if other, dup := seen[what+v]; dup {
			t.Errorf("%s %s used by %s and %s", what, v, other, host)
		}
		seen[what+v] = host
	}
	for _, h := range hosts {
		unique("name", h.Name, h.Name)
		unique("container", h.Container, h.Name)
		if h.Container != Prefix+"-"+h.Name || !isLabName(h.Container) {
			t.Errorf("%s: container %q", h.Name, h.Container)
		}
		found := false
		for _, a := range h.Networks {
			n, ok := nets[a.Network]
			if !ok {
				t.Fatalf("%s: unknown network %s", h.Name, a.Network)
			}
			for _, addr := range []string{a.IPv4, a.IPv6} {
				if addr == "" {
					continue
				}
				unique("address", addr, h.Name)
				found = found || addr == h.Address
				ip := netip.MustParseAddr(addr)
				in := false
				for _, s := range n.Subnets {
					if netip.MustParsePrefix(s.Subnet).Contains(ip) {
						in = true
						if s.IPRange != "" && netip.MustParsePrefix(s.IPRange).Contains(ip) {
							t.Errorf("%s: %s is inside docker's ip-range %s", h.Name, addr, s.IPRange)
						}
						if addr == s.Gateway {
							t.Errorf("%s: %s is the gateway", h.Name, addr)
						}
					}
				}
				if !in {
					t.Errorf("%s: %s is not in network %s's subnets", h.Name, addr, a.Network)
				}
			}
		}
		if !found {
			t.Errorf("%s: address %s is none of its network addresses", h.Name, h.Address)
		}
		if strings.HasPrefix(h.Name, "in-") != (h.Jump == BastionHost) {
			t.Errorf("%s: jump %q", h.Name, h.Jump)
		}
		if strings.HasPrefix(h.Name, "in-") && (len(h.Networks) != 1 || h.Networks[0].Network != InternalNetworkName) {
			t.Errorf("%s must be on the internal network only: %+v", h.Name, h.Networks)
		}
		if strings.HasPrefix(h.Name, "v6-") && (!h.IPv6Only || !netip.MustParseAddr(h.Address).Is6()) {
			t.Errorf("%s must be IPv6-only with an IPv6 address: %+v", h.Name, h)
		}
	}
	m := hosts[len(hosts)-1]
	if m.Address != MirrorAddress || m.Zone != "az-c" || len(m.Networks) != 3 {
		t.Errorf("mirror: %+v", m)
	}
	b := hosts[7]
	if b.Address != BastionAddress || len(b.Networks) != 2 || b.Networks[1].Network != InternalNetworkName {
		t.Errorf("bastion: %+v", b)
	}
	vip := netip.MustParseAddr(VIP)
	if !netip.MustParsePrefix(Subnet).Contains(vip) || netip.MustParsePrefix(IPRange).Contains(vip) {
		t.Errorf("VIP %s must be in %s, outside docker's range %s", VIP, Subnet, IPRange)
	}
	if other, taken := seen["address"+VIP]; taken {
		t.Errorf("host %s has the VIP", other)
	}
	// Kubernetes nodes (Options.Workers): cp-a/b/c and w-a/b/c, each in its zone, workers with role
	// worker only and addresses outside docker's range; in-* and v6-* are not nodes.
	kube, err := hostsFor(Options{Members: 3, Workers: true, Bastion: true, IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, h := range kube {
		if !h.KubeNode() {
			continue
		}
		nodes = append(nodes, h.Name+"/"+h.Zone)
		if h.ContainerdVolume() != Prefix+"-"+h.Name+"-containerd" {
			t.Errorf("%s: containerd volume %q", h.Name, h.ContainerdVolume())
		}
		if a := netip.MustParseAddr(h.Address); netip.MustParsePrefix(IPRange).Contains(a) || !netip.MustParsePrefix(Subnet).Contains(a) {
			t.Errorf("%s: address %s must be in %s, outside %s", h.Name, a, Subnet, IPRange)
		}
		if strings.HasPrefix(h.Name, "w-") && !slices.Equal(h.Roles, []v1alpha1.Role{v1alpha1.RoleWorker}) {
			t.Errorf("%s: roles %v", h.Name, h.Roles)
		}
	}
	if want := []string{"cp-a/az-a", "cp-b/az-b", "cp-c/az-c", "w-a/az-a", "w-b/az-b", "w-c/az-c"}; !slices.Equal(nodes, want) {
		t.Errorf("kubernetes nodes %v, want %v", nodes, want)
	}
}

func TestNetworkCreateArgs(t *testing.T) {
	// InternalNetwork: the internal network alone, and no host on it.
	o := Options{Members: 3, InternalNetwork: true}
	if nets := networksFor(o); len(nets) != 2 || nets[1].Name != InternalNetworkName || !nets[1].Internal {
		t.Errorf("InternalNetwork: networks %+v, want the lab network and %s", nets, InternalNetworkName)
	}
	hosts, err := hostsFor(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if len(h.Networks) > 1 {
			t.Errorf("InternalNetwork put %s on %+v", h.Name, h.Networks)
		}
	}
	nets := networksFor(Options{Bastion: true, IPv6: true})
	got := [][]string{nets[1].createArgs(), nets[2].createArgs()}
	want := [][]string{
		{"network", "create", "--driver", "bridge", "--internal", "--subnet", "172.29.0.0/24", "--ip-range", "172.29.0.128/25",
			"--gateway", "172.29.0.1", "hactl-lab-internal"},
		{"network", "create", "--driver", "bridge", "--ipv6", "--subnet", "172.30.0.0/24", "--ip-range", "172.30.0.128/25",
			"--gateway", "172.30.0.1", "--subnet", "fd00:db8:28::/64", "--gateway", "fd00:db8:28::1", "hactl-lab-v6"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("createArgs =\n%q\nwant\n%q", got, want)
	}
	// Overlap check: another network on 172.29.0.0/16 blocks the internal network; ours does not.
	if err := checkOverlap(nets[1], map[string][]string{"other": {"172.29.0.0/16"}}); err == nil {
		t.Error("overlapping foreign network accepted")
	}
	if err := checkOverlap(nets[1], map[string][]string{InternalNetworkName: {InternalSubnet}, "bridge": {"172.17.0.0/16"}}); err != nil {
		t.Error(err)
	}
	if err := checkOverlap(nets[2], map[string][]string{"v6": {"fd00:db8::/32"}}); err == nil {
		t.Error("overlapping IPv6 network accepted")
	}
}

func TestContainerCommands(t *testing.T) {
	hosts, _ := hostsFor(Options{Members: 3, Bastion: true, IPv6: true, Mirror: true})
	byName := map[string]Host{}
	for _, h := range hosts {
		byName[h.Name] = h
	}
	flags := strings.Join(containerFlags, " ")
	cp := containerCommands(byName["cp-a"], "img:1", "/lab/init")
	if len(cp) != 1 || strings.Join(cp[0], " ") != "run -d --name hactl-lab-cp-a --hostname cp-a --network hactl-lab --ip 172.28.0.11 "+flags+" img:1 /lib/systemd/systemd" {
		t.Errorf("cp-a (no Kubernetes): %q", cp)
	}
	kube, _ := hostsFor(Options{Members: 3, Kubernetes: true})
	node := strings.Join(containerCommands(kube[0], "img:1", "/lab/init")[0], " ")
	for _, want := range []string{"--cgroupns=private", "-v /lab/init:/hactl-lab-init:ro", "-v hactl-lab-cp-a-containerd:/var/lib/containerd",
		"-v /lib/modules:/lib/modules:ro", "--device-cgroup-rule a *:* rwm", "img:1 /hactl-lab-init"} {
		if !strings.Contains(node, want) {
			t.Errorf("cp-a as a Kubernetes node lacks %q: %s", want, node)
		}
	}
	if strings.Contains(node, "/sys/fs/cgroup") || strings.Contains(node, "cgroupns=host") {
		t.Errorf("a Kubernetes node must not see the machine's cgroup hierarchy: %s", node)
	}
	lb := containerCommands(byName["lb-b"], "img:1", "/lab/init")
	if len(lb) != 1 || strings.Join(lb[0], " ") != "run -d --name hactl-lab-lb-b --hostname lb-b --network hactl-lab --ip 172.28.0.22 "+flags+" img:1 /lib/systemd/systemd" {
		t.Errorf("lb-b: %q", lb)
	}
	if in := strings.Join(containerCommands(byName["in-a"], "img:1", "/lab/init")[0], " "); strings.Contains(in, "containerd") {
		t.Errorf("in-a is no kubernetes node: %s", in)
	}
	v6 := containerCommands(byName["v6-b"], "img:1", "/lab/init")
	if len(v6) != 1 || !strings.Contains(strings.Join(v6[0], " "), "--network hactl-lab-v6 --ip 172.30.0.12 --ip6 fd00:db8:28::12 ") {
		t.Errorf("v6-b: %q", v6)
	}
	b := containerCommands(byName["bastion"], "img:1", "/lab/init")
	want := [][]string{
		append(append([]string{"create", "--name", "hactl-lab-bastion", "--hostname", "bastion", "--network", "hactl-lab", "--ip", "172.28.0.40"},
			containerFlags...), "img:1", "/lib/systemd/systemd"),
		{"network", "connect", "--ip", "172.29.0.40", "hactl-lab-internal", "hactl-lab-bastion"},
		{"start", "hactl-lab-bastion"},
	}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("bastion:\n%q\nwant\n%q", b, want)
	}
	m := containerCommands(byName["mirror"], "img:1", "/lab/init")
	if len(m) != 4 || strings.Join(m[2], " ") != "network connect --ip 172.30.0.32 --ip6 fd00:db8:28::32 hactl-lab-v6 hactl-lab-mirror" {
		t.Errorf("mirror: %q", m)
	}
}

func TestNetShape(t *testing.T) {
	in := bastionHosts()[1]
	unit := netUnitText(in)
	for _, want := range []string{"Before=network.target ssh.service", "WantedBy=multi-user.target",
		`-s 172.29.0.1 -j REJECT --reject-with icmp-host-unreachable`, `! -s 172.29.0.0/24 -j REJECT`, "Type=oneshot"} {
		if !strings.Contains(unit, want) {
			t.Errorf("in-a unit lacks %q:\n%s", want, unit)
		}
	}
	if u := netUnitText(ipv6Hosts()[0]); !strings.Contains(u, `ExecStart=/bin/sh -ec "ip -4 addr flush scope global"`) {
		t.Errorf("v6-a unit:\n%s", u)
	}
	for _, h := range append(bastionHosts()[:1], mirrorHost(true, true)) {
		if u := netUnitText(h); u != "" {
			t.Errorf("%s needs no network unit, got:\n%s", h.Name, u)
		}
	}
	if got := systemdQuote(`a "b" $X 50% \n`); got != `"a \"b\" $$X 50%% \\n"` {
		t.Errorf("systemdQuote = %s", got)
	}
	s := hostSetupScript(in)
	for _, want := range []string{"for u in root hactl hactlpw", "printf 'hactlpw:%s\\n' \"$pw\" | chpasswd",
		"enable --now hactl-lab-net.service", "cat /etc/ssh/ssh_host_*_key.pub"} {
		if !strings.Contains(s, want) {
			t.Errorf("setup script of in-a lacks %q:\n%s", want, s)
		}
	}
	if s := hostSetupScript(bastionHosts()[0]); strings.Contains(s, netUnit) {
		t.Errorf("bastion's setup script installs %s", netUnit)
	}
}

func TestKnownHostsLinesIPv6(t *testing.T) {
	pubs := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPv7pr4lr6XMOh2IWf9RGrEQqEKDP0C4GVr8y7s2V3bK root@v6-a\n"
	for port, want := range map[int]string{22: "fd00:db8:28::11 ", 2222: "[fd00:db8:28::11]:2222 "} {
		got, err := knownHostsLines("fd00:db8:28::11", port, pubs)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("port %d: %q, want prefix %q", port, got, want)
		}
	}
}

func TestBuildVariantSpec(t *testing.T) {
	dir := "/lab"
	dl := &v1alpha1.EtcdDownload{URL: "http://172.28.0.32:8080/" + TarballName(EtcdVersion), SHA256: strings.Repeat("ab", 32)}
	for _, v := range Variants() {
		t.Run(string(v), func(t *testing.T) {
			var d *v1alpha1.EtcdDownload
			if v == VariantDownload {
				d = dl
			}
			c, err := BuildVariantSpec(v, dir, "/repo/bin", d)
			if err != nil {
				t.Fatal(err)
			}
			b, err := MarshalSpec(c)
			if err != nil {
				t.Fatal(err)
			}
			var back v1alpha1.Cluster
			if err := yaml.UnmarshalStrict(b, &back); err != nil {
				t.Fatalf("does not load strictly: %v\n%s", err, b)
			}
			if !reflect.DeepEqual(&back, c) {
				t.Errorf("round trip:\n got %+v\nwant %+v\n%s", back, *c, b)
			}
			if c.Metadata.Name != "lab-"+string(v) || c.Spec.StateDir != "/lab/state-"+string(v) ||
				c.Spec.SSH.IdentityFile != "/lab/id_ed25519" || c.Spec.SSH.KnownHostsFile != "/lab/known_hosts" {
				t.Errorf("name/paths: %+v", c)
			}
			if len(c.EtcdHosts()) != 3 {
				t.Errorf("%d etcd hosts", len(c.EtcdHosts()))
			}
			if c.Spec.LoadBalancer != nil || slices.ContainsFunc(c.Spec.Hosts, func(h v1alpha1.Host) bool { return h.HasRole(v1alpha1.RoleLB) }) {
				t.Errorf("variant %s has a load balancer: %+v", v, c.Spec)
			}
			zones := map[string]bool{}
			for _, h := range c.Spec.Hosts {
				zones[h.Zone] = true
			}
			if len(zones) != 3 {
				t.Errorf("zones %v", zones)
			}
			hasBinaries := strings.Contains(string(b), "binaries:")
			if strings.Contains(string(b), "sudo: {}") {
				t.Errorf("empty sudo block rendered:\n%s", b)
			}
			switch v {
			case VariantSudo:
				if c.Spec.SSH.User != SudoUser || c.Spec.SSH.Sudo.PasswordEnv != "" {
					t.Errorf("ssh: %+v", c.Spec.SSH)
				}
			case VariantSudoPassword:
				if c.Spec.SSH.User != SudoPasswordUser || c.Spec.SSH.Sudo.PasswordEnv != SudoPasswordEnv {
					t.Errorf("ssh: %+v", c.Spec.SSH)
				}
			case VariantBastion:
				if c.Spec.SSH.User != "root" || c.Spec.SSH.Bastion == nil ||
					*c.Spec.SSH.Bastion != (v1alpha1.Bastion{Address: BastionAddress, Port: 22, User: SudoUser}) {
					t.Errorf("ssh: %+v", c.Spec.SSH)
				}
				for _, h := range c.Spec.Hosts {
					if !strings.HasPrefix(h.Name, "in-") || !strings.HasPrefix(h.Address, "172.29.0.") {
						t.Errorf("host %+v", h)
					}
				}
			case VariantIPv6:
				for _, h := range c.Spec.Hosts {
					if a, err := netip.ParseAddr(h.Address); err != nil || !a.Is6() || a.String() != h.Address {
						t.Errorf("host %+v: not a canonical IPv6 address", h)
					}
				}
			case VariantDownload:
				if c.Spec.Etcd.Download == nil || *c.Spec.Etcd.Download != *dl || c.Spec.Etcd.Binaries != (v1alpha1.EtcdBinaries{}) || hasBinaries {
					t.Errorf("etcd: %+v\n%s", c.Spec.Etcd, b)
				}
			}
			if v != VariantDownload && (!hasBinaries || c.Spec.Etcd.Download != nil) {
				t.Errorf("variant %s must upload binaries:\n%s", v, b)
			}
		})
	}
	if _, err := BuildVariantSpec(VariantDownload, dir, "/bin", nil); err == nil {
		t.Error("download variant without a download: want an error")
	}
	if _, err := BuildVariantSpec(VariantSudo, dir, "/bin", dl); err == nil {
		t.Error("sudo variant with a download: want an error")
	}
	if _, err := BuildVariantSpec("nope", dir, "/bin", nil); err == nil {
		t.Error("unknown variant: want an error")
	}
}

func TestWithoutLoadBalancer(t *testing.T) {
	c, err := BuildSpec(5, "/lab", "/bin")
	if err != nil {
		t.Fatal(err)
	}
	WithoutLoadBalancer(c)
	var names []string
	for _, h := range c.Spec.Hosts {
		names = append(names, h.Name)
	}
	if c.Spec.LoadBalancer != nil || strings.Join(names, " ") != "cp-a cp-b cp-c etcd-d etcd-e" {
		t.Errorf("hosts %v, load balancer %+v", names, c.Spec.LoadBalancer)
	}
}

func TestWriteSpecsIncludesSudoVariants(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteSpecs(dir, "/repo/bin")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	if got := strings.Join(names, " "); got != "cluster-3.yaml cluster-5.yaml cluster-sudo.yaml cluster-sudopw.yaml" {
		t.Errorf("WriteSpecs wrote %s", got)
	}
}

func TestBuildEtcdTarball(t *testing.T) {
	bin, out := t.TempDir(), t.TempDir()
	content := map[string]string{"etcd": "etcd binary", "etcdctl": "etcdctl binary", "etcdutl": "etcdutl binary"}
	for n, c := range content {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path, sum, err := BuildEtcdTarball(bin, out)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "etcd-"+EtcdVersion+"-linux-"+runtime.GOARCH+".tar.gz" {
		t.Errorf("tarball name %s", path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(raw); hex.EncodeToString(h[:]) != sum {
		t.Errorf("sha256 %s does not match the file", sum)
	}
	if b, _ := os.ReadFile(filepath.Join(out, TarballSHA256File)); string(b) != sum+"\n" {
		t.Errorf("%s = %q", TarballSHA256File, b)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	top := "etcd-" + EtcdVersion + "-linux-" + runtime.GOARCH + "/"
	var entries []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Mode != 0o755 {
			t.Errorf("%s: uid %d gid %d mode %o", h.Name, h.Uid, h.Gid, h.Mode)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			if want := content[strings.TrimPrefix(h.Name, top)]; string(b) != want {
				t.Errorf("%s holds %q, want %q", h.Name, b, want)
			}
		}
	}
	if got := strings.Join(entries, " "); got != top+" "+top+"etcd "+top+"etcdctl "+top+"etcdutl" {
		t.Errorf("entries: %s", got)
	}

	// Cached: same inputs, same file; deterministic: a rebuild gives the same bytes.
	st1, _ := os.Stat(path)
	if _, sum2, err := BuildEtcdTarball(bin, out); err != nil || sum2 != sum {
		t.Fatalf("second build: %s, %v", sum2, err)
	}
	if st2, _ := os.Stat(path); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("unchanged binaries: tarball was rebuilt")
	}
	out2 := t.TempDir()
	if _, sum3, err := BuildEtcdTarball(bin, out2); err != nil || sum3 != sum {
		t.Errorf("rebuild elsewhere: sha256 %s, want %s (%v)", sum3, sum, err)
	}
	// A changed binary invalidates the cache.
	later := time.Now().Add(time.Hour)
	if err := os.WriteFile(filepath.Join(bin, "etcd"), []byte("etcd binary v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(bin, "etcd"), later, later)
	if _, sum4, err := BuildEtcdTarball(bin, out); err != nil || sum4 == sum {
		t.Errorf("changed binary: sha256 %s unchanged (%v)", sum4, err)
	}
	// Missing binaries: an error naming the fix.
	if _, _, err := BuildEtcdTarball(t.TempDir(), out); err == nil || !strings.Contains(err.Error(), "build-etcd.sh") {
		t.Errorf("missing binaries: %v", err)
	}
}

func TestTarballURLs(t *testing.T) {
	name := TarballName(EtcdVersion)
	got := tarballURLs(EtcdTarball{Name: name}, mirrorHost(true, true))
	want := EtcdTarball{Name: name,
		URL:         "http://172.28.0.32:8080/" + name,
		InternalURL: "http://172.29.0.32:8080/" + name,
		IPv6URL:     "http://[fd00:db8:28::32]:8080/" + name,
	}
	if got != want {
		t.Errorf("tarballURLs =\n%+v\nwant\n%+v", got, want)
	}
	if got := tarballURLs(EtcdTarball{Name: name}, mirrorHost(false, false)); got.InternalURL != "" || got.IPv6URL != "" {
		t.Errorf("mirror on the lab network only: %+v", got)
	}
	if got := (EtcdTarball{SHA256: "x"}).Download("u"); *got != (v1alpha1.EtcdDownload{URL: "u", SHA256: "x"}) {
		t.Errorf("Download = %+v", got)
	}
}

func TestImageRecipe(t *testing.T) {
	pk := strings.Join(HostPackages(), " ")
	for _, p := range []string{"sudo", "busybox", "openssh-server", "systemd", "socat", "iptables", "zstd", "curl"} {
		if !strings.Contains(" "+pk+" ", " "+p+" ") {
			t.Errorf("host packages lack %s: %s", p, pk)
		}
	}
	// The Kubernetes node packages come from the mirror's apt repository, installed by hactl.
	for _, p := range []string{"containerd", "runc", "containernetworking-plugins", "conntrack", "kmod"} {
		if strings.Contains(" "+pk+" ", " "+p+" ") {
			t.Errorf("host packages hold %s, which hactl must install from the mirror: %s", p, pk)
		}
	}
	for _, u := range []string{"haproxy.service", "keepalived.service"} {
		if !slices.Contains(disabledUnits[:], u) {
			t.Errorf("%s must not start at boot (disabledUnits %v)", u, disabledUnits)
		}
	}
	for _, want := range []string{"hactl ALL=(ALL:ALL) NOPASSWD: ALL\n", "hactlpw ALL=(ALL:ALL) ALL\n"} {
		if !strings.Contains(sudoersDropIn, want) {
			t.Errorf("sudoers lacks %q", want)
		}
	}
}
