package lab

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/specload"
)

func TestFindMirror(t *testing.T) {
	tests := []struct {
		name, aptDir, suite, want string
	}{
		{"deb822 prefers the stanza listing the suite", "testdata/apt", "bookworm", "http://mirror.example.invalid/debian"},
		{"deb822 falls back to the first non-security entry", "testdata/apt", "trixie", "http://mirror.example.invalid/debian"},
		{"one-line sources.list with options", "testdata/apt-legacy", "bookworm", "http://legacy.example.invalid/debian"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindMirror(tt.aptDir, tt.suite)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("FindMirror(%s, %s) = %q, want %q", tt.aptDir, tt.suite, got, tt.want)
			}
		})
	}
}

func TestFindMirrorNone(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sources.list"), []byte("deb http://sec.example.invalid/x bookworm-security main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := FindMirror(dir, "bookworm"); err == nil {
		t.Fatalf("FindMirror = %q, want an error (only a security archive is configured)", got)
	}
}

func TestParseDeb822Sources(t *testing.T) {
	f, err := os.Open("testdata/apt/sources.list.d/debian.sources")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parseDeb822Sources(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []aptSource{
		{URIs: []string{"http://deb.debian.org/debian-security"}, Suites: []string{"bookworm-security"}},
		{URIs: []string{"http://mirror.example.invalid/debian", "http://second.example.invalid/debian"}, Suites: []string{"bookworm", "bookworm-updates"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseDeb822Sources =\n%+v\nwant\n%+v", got, want)
	}
}

func TestImageTag(t *testing.T) {
	pk := HostPackages()
	tag := ImageTag("1", "bookworm", pk)
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(tag) {
		t.Fatalf("tag %q is not 12 hex digits", tag)
	}
	reversed := append([]string(nil), pk...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	if got := ImageTag("1", "bookworm", reversed); got != tag {
		t.Errorf("tag depends on package order: %q vs %q", got, tag)
	}
	for name, other := range map[string]string{
		"recipe":   ImageTag("2", "bookworm", pk),
		"suite":    ImageTag("1", "trixie", pk),
		"packages": ImageTag("1", "bookworm", append(pk, "sudo")),
	} {
		if other == tag {
			t.Errorf("changing the %s does not change the tag %q", name, tag)
		}
	}
	if want := ImageRepo + ":" + ImageTag(imageRecipeVersion, Suite, HostPackages()); ImageRef() != want {
		t.Errorf("ImageRef() = %q, want %q", ImageRef(), want)
	}
}

func TestWriteSpecs(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteSpecs(dir, "/repo/bin")
	if err != nil {
		t.Fatal(err)
	}
	for i, members := range []int{3, 5} {
		b, err := os.ReadFile(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		var c v1alpha1.Cluster
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			t.Fatalf("%s does not load strictly: %v", paths[i], err)
		}
		want, err := BuildSpec(members, dir, "/repo/bin")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&c, want) {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", paths[i], c, *want)
		}
		if c.Metadata.Name != map[int]string{3: "lab3", 5: "lab5"}[members] {
			t.Errorf("metadata.name = %q", c.Metadata.Name)
		}
		if len(c.EtcdHosts()) != members {
			t.Errorf("%d etcd hosts, want %d", len(c.EtcdHosts()), members)
		}
		if c.Spec.StateDir != filepath.Join(dir, stateDirName(members)) ||
			c.Spec.SSH.IdentityFile != filepath.Join(dir, "id_ed25519") ||
			c.Spec.SSH.KnownHostsFile != filepath.Join(dir, "known_hosts") ||
			c.Spec.Etcd.Binaries.Etcd != "/repo/bin/etcd" || c.Spec.Etcd.Version != EtcdVersion {
			t.Errorf("paths or version wrong: %+v", c.Spec)
		}
		// No zone may hold a majority of members: losing one zone keeps quorum.
		perZone := map[string]int{}
		for _, h := range c.EtcdHosts() {
			perZone[h.Zone]++
		}
		// The load balancer: VIP/24 on lb-a and lb-b (one zone each) in front of cp-a/b/c.
		if lb := c.Spec.LoadBalancer; lb == nil || lb.VIP != "172.28.0.100/24" || lb.Topology != v1alpha1.TopologyDedicated {
			t.Errorf("spec.loadBalancer = %+v", lb)
		}
		var lbs, cps []string
		for _, h := range c.LBHosts() {
			lbs = append(lbs, h.Name+"/"+h.Zone)
		}
		for _, h := range c.ControlPlaneHosts() {
			cps = append(cps, h.Name)
		}
		if strings.Join(lbs, " ") != "lb-a/az-a lb-b/az-b" || strings.Join(cps, " ") != "cp-a cp-b cp-c" {
			t.Errorf("lb hosts %v, control-plane hosts %v", lbs, cps)
		}
		// hactl's own loader (strict decoding, defaults, validation) accepts the file.
		if _, _, err := specload.Load(paths[i]); err != nil {
			t.Errorf("hactl's loader rejects %s: %v", paths[i], err)
		}
		for z, n := range perZone {
			if members-n <= members/2 {
				t.Errorf("zone %s holds %d of %d members: losing it loses quorum", z, n, members)
			}
		}
	}
}

func TestBuildSpecRejectsOtherSizes(t *testing.T) {
	if _, err := BuildSpec(4, "/lab", "/bin"); err == nil {
		t.Fatal("BuildSpec(4) succeeded, want an error")
	}
}

// The lab's etcd version must be the one tools/etcd pins (and hack/build-etcd.sh builds).
func TestEtcdVersionMatchesToolsModule(t *testing.T) {
	b, err := os.ReadFile("../../tools/etcd/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "go.etcd.io/etcd/server/v3" {
			if f[1] != EtcdVersion {
				t.Errorf("tools/etcd pins %s, lab specs say %s", f[1], EtcdVersion)
			}
			return
		}
	}
	t.Fatal("tools/etcd/go.mod does not require go.etcd.io/etcd/server/v3")
}

func TestIsLabName(t *testing.T) {
	for name, want := range map[string]bool{
		"hactl-lab": true, "hactl-lab-cp-a": true, "hactl-lab-cp-a-containerd": true,
		"hactl-labs": false, "my-hactl-lab": false, "hactl": false, "": false, "hactl-lab_x": false,
	} {
		if got := isLabName(name); got != want {
			t.Errorf("isLabName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestKnownHostsLines(t *testing.T) {
	pubs := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPv7pr4lr6XMOh2IWf9RGrEQqEKDP0C4GVr8y7s2V3bK root@cp-a\n"
	got, err := knownHostsLines("172.28.0.11", 22, pubs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"172.28.0.11 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPv7pr4lr6XMOh2IWf9RGrEQqEKDP0C4GVr8y7s2V3bK"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("knownHostsLines = %q, want %q", got, want)
	}
	if _, err := knownHostsLines("172.28.0.11", 22, ""); err == nil {
		t.Error("no keys: want an error")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "id_ed25519")
	s1, pub1, err := loadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", st.Mode(), err)
	}
	if b, _ := os.ReadFile(p); !strings.HasPrefix(string(b), "-----BEGIN OPENSSH PRIVATE KEY-----") {
		t.Errorf("private key is not in OpenSSH format: %.40q", b)
	}
	if !strings.HasPrefix(string(pub1), "ssh-ed25519 ") {
		t.Errorf("public key %q", pub1)
	}
	s2, pub2, err := loadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(pub1) != string(pub2) || string(s1.PublicKey().Marshal()) != string(s2.PublicKey().Marshal()) {
		t.Error("second call generated a new key instead of loading the existing one")
	}
}

func TestShellJoin(t *testing.T) {
	got := shell.Join("docker", "exec", "hactl-lab-cp-a", "sh", "-c", "echo 'hi' && true", "")
	want := `docker exec hactl-lab-cp-a sh -c 'echo '\''hi'\'' && true' ''`
	if got != want {
		t.Errorf("shell.Join = %s, want %s", got, want)
	}
}

func TestCheckInotify(t *testing.T) {
	for _, tc := range []struct {
		instances, watches string
		want               string // "" = accepted
	}{
		{"8192\n", "524288\n", ""},
		{"128\n", "524288\n", "fs.inotify.max_user_instances is 128"},
		{"1024\n", "8192\n", "fs.inotify.max_user_watches is 8192"},
		{"many\n", "524288\n", "max_user_instances"},
	} {
		dir := t.TempDir()
		for f, v := range map[string]string{"max_user_instances": tc.instances, "max_user_watches": tc.watches} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := checkInotify(dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q/%q: %v, want accepted", tc.instances, tc.watches, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q/%q: %v, want an error with %q", tc.instances, tc.watches, err, tc.want)
		}
	}
	if err := checkInotify(t.TempDir()); err == nil {
		t.Error("no limit files: accepted")
	}
}
