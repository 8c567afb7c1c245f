package v1alpha1

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCanonicalAddress(t *testing.T) {
	for in, want := range map[string]string{
		"2001:DB8::0001":         "2001:db8::1",
		"2001:db8:0:0:0:0:0:1":   "2001:db8::1",
		"::ffff:1.2.3.4":         "1.2.3.4",
		"::FFFF:102:304":         "1.2.3.4",
		"10.0.0.1":               "10.0.0.1",
		"fe80::1%eth0":           "fe80::1%eth0", // zone: left for Validate to refuse
		"etcd-1.example.com":     "etcd-1.example.com",
		"":                       "",
		"2001:0db8:0000::0a00:1": "2001:db8::a00:1",
	} {
		if got := CanonicalAddress(in); got != want {
			t.Errorf("CanonicalAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetDefaults(t *testing.T) {
	home := t.TempDir()
	c := &Cluster{
		APIVersion: APIVersion, Kind: Kind,
		Metadata: ObjectMeta{Name: "lab"},
		Spec: ClusterSpec{
			SSH: SSH{Port: 2222, IdentityFile: "~/.ssh/id_ed25519"},
			Hosts: []Host{
				{Name: "a", Address: "2001:DB8::A", Zone: "z1", Roles: []Role{RoleEtcd}},
				{Name: "b", Address: "10.0.0.2", Port: 22, Zone: "z2", Roles: []Role{RoleEtcd}},
			},
			Etcd: Etcd{Binaries: EtcdBinaries{Etcd: "bin/etcd", Etcdctl: "/opt/etcdctl"}},
		},
	}
	SetDefaults(c, Dirs{Base: "/specs", Home: home})
	want := ClusterSpec{
		StateDir: filepath.Join(home, ".hactl", "lab"),
		SSH: SSH{
			User: "root", Port: 2222,
			IdentityFile:   filepath.Join(home, ".ssh", "id_ed25519"),
			KnownHostsFile: filepath.Join(home, ".ssh", "known_hosts"),
			ConnectTimeout: Duration{10 * time.Second}, CommandTimeout: Duration{2 * time.Minute},
			MaxParallel: 10, Agent: "auto",
		},
		Hosts: []Host{
			{Name: "a", Address: "2001:db8::a", Port: 2222, Zone: "z1", Roles: []Role{RoleEtcd}},
			{Name: "b", Address: "10.0.0.2", Port: 22, Zone: "z2", Roles: []Role{RoleEtcd}},
		},
		Etcd: Etcd{
			Binaries:          EtcdBinaries{Etcd: "/specs/bin/etcd", Etcdctl: "/opt/etcdctl"},
			DataDir:           "/var/lib/etcd",
			ClientPort:        2379,
			PeerPort:          2380,
			HeartbeatInterval: Duration{100 * time.Millisecond},
			ElectionTimeout:   Duration{1000 * time.Millisecond},
			QuotaBackendBytes: 2147483648,
			AutoCompaction:    AutoCompaction{Mode: "periodic", Retention: "1h"},
		},
	}
	if !reflect.DeepEqual(c.Spec, want) {
		t.Errorf("defaulted spec:\n got %+v\nwant %+v", c.Spec, want)
	}
	// Idempotent.
	before := fmt.Sprintf("%+v", *c)
	SetDefaults(c, Dirs{Base: "/elsewhere", Home: home})
	if after := fmt.Sprintf("%+v", *c); after != before {
		t.Errorf("second SetDefaults changed the spec:\n%s\n%s", before, after)
	}
	// Revision mode gets no periodic retention.
	r := &Cluster{Spec: ClusterSpec{Etcd: Etcd{AutoCompaction: AutoCompaction{Mode: CompactionRevision}}}}
	SetDefaults(r, Dirs{})
	if r.Spec.Etcd.AutoCompaction.Retention != "" {
		t.Errorf("revision retention defaulted to %q", r.Spec.Etcd.AutoCompaction.Retention)
	}
}

// TestSetDefaultsAccess covers the issue-3 defaults: agent, bastion (port 22, user and known_hosts
// from spec.ssh, no key of its own), local paths of identityFiles and the bastion's files, bastion
// address canonicalised only when it is an IP, sha256 lower-cased.
func TestSetDefaultsAccess(t *testing.T) {
	dirs := Dirs{Base: "/specs", Home: "/home/u"}
	c := &Cluster{Spec: ClusterSpec{
		SSH: SSH{
			User: "deploy", Port: 2222, KnownHostsFile: "kh",
			IdentityFiles: []string{"~/.ssh/id_rsa", "keys/deploy", "/abs/k"},
			Bastion:       &Bastion{Address: "2001:DB8::0010"},
		},
		Etcd: Etcd{Download: &EtcdDownload{URL: "https://m.example/e.tgz", SHA256: "ABCdef"}},
	}}
	SetDefaults(c, dirs)
	s := c.Spec.SSH
	if s.Agent != AgentAuto {
		t.Errorf("agent %q, want auto", s.Agent)
	}
	if want := []string{"/home/u/.ssh/id_rsa", "/specs/keys/deploy", "/abs/k"}; !slices.Equal(s.IdentityFiles, want) {
		t.Errorf("identityFiles %v, want %v", s.IdentityFiles, want)
	}
	// Port 22, not spec.ssh.port: the bastion is another machine.
	if want := (Bastion{Address: "2001:db8::10", Port: 22, User: "deploy", KnownHostsFile: "/specs/kh"}); *s.Bastion != want {
		t.Errorf("bastion %+v, want %+v", *s.Bastion, want)
	}
	if got := c.Spec.Etcd.Download.SHA256; got != "abcdef" {
		t.Errorf("sha256 %q, want lower case", got)
	}
	before := fmt.Sprintf("%+v %+v %+v", c.Spec, *s.Bastion, *c.Spec.Etcd.Download)
	SetDefaults(c, Dirs{Base: "/elsewhere", Home: "/home/u"})
	if after := fmt.Sprintf("%+v %+v %+v", c.Spec, *c.Spec.SSH.Bastion, *c.Spec.Etcd.Download); after != before {
		t.Errorf("second SetDefaults changed the spec:\n%s\n%s", before, after)
	}

	// Explicit bastion values are kept; a DNS name is left as written; its files are expanded.
	c = &Cluster{Spec: ClusterSpec{SSH: SSH{Bastion: &Bastion{Address: "Jump.Example.COM", Port: 2200, User: "jump",
		IdentityFile: "~/.ssh/id_jump", KnownHostsFile: "./bastion_known_hosts"}}}}
	SetDefaults(c, dirs)
	want := Bastion{Address: "Jump.Example.COM", Port: 2200, User: "jump", IdentityFile: "/home/u/.ssh/id_jump", KnownHostsFile: "/specs/bastion_known_hosts"}
	if *c.Spec.SSH.Bastion != want {
		t.Errorf("bastion %+v, want %+v", *c.Spec.SSH.Bastion, want)
	}
	if c.Spec.SSH.Agent != AgentAuto || c.Spec.SSH.User != "root" {
		t.Errorf("ssh %+v", c.Spec.SSH)
	}
}

func TestLocalPath(t *testing.T) {
	for _, tc := range []struct{ in, base, want string }{
		{"", "/b", ""},
		{"~", "/b", "/home/u"},
		{"~/k", "/b", "/home/u/k"},
		{"k/../id", "/b", "/b/id"},
		{"./bin/etcd", "/b", "/b/bin/etcd"},
		{"/abs//x/", "/b", "/abs/x"},
		{"rel", "", "rel"},
		{"~other/k", "/b", "/b/~other/k"},
	} {
		if got := LocalPath(tc.in, Dirs{Base: tc.base, Home: "/home/u"}); got != tc.want {
			t.Errorf("LocalPath(%q, %q) = %q, want %q", tc.in, tc.base, got, tc.want)
		}
	}
	// An unknown home directory leaves "~" paths as written (neither joined to the base nor cleaned).
	for _, in := range []string{"~", "~/k", "~/a/../k"} {
		if got := LocalPath(in, Dirs{Base: "/b"}); got != in {
			t.Errorf("LocalPath(%q) without a home = %q, want it as written", in, got)
		}
	}
}

func TestTypeMeta(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"kind: Cluster\n", "c.yaml:1: apiVersion: required; add `apiVersion: hactl.io/v1alpha1`"},
		{"apiVersion: hactl.io/v1alpha1\n", "c.yaml:1: kind: required; add `kind: Cluster`"},
		{"apiVersion: hactl.io/v1alpha1\nkind: [Cluster]\n", `c.yaml:2: kind: must be the string "Cluster", got a list`},
		{"- a\n", "c.yaml:1: the document must be a mapping"},
		{"---\n", "c.yaml:1: the spec is empty"},
	} {
		_, _, err := Decode([]byte(tc.doc), "c.yaml", Dirs{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// exampleDirs are the directories the example is decoded with: fresh ones, as a user's would be.
func exampleDirs(t *testing.T) Dirs { return Dirs{Base: t.TempDir(), Home: t.TempDir()} }

// TestExampleSpec: the example decodes and validates without warnings (with lb's failover proof:
// specload's TestExampleSpecLoads), and shows every field of the spec.
func TestExampleSpec(t *testing.T) {
	ex := ExampleSpec()
	c, warns, err := Decode(ex, "example.yaml", exampleDirs(t), nil)
	if err != nil {
		t.Fatalf("example spec: %v", err)
	}
	if len(warns) > 0 {
		t.Errorf("example spec warns: %v", warns)
	}
	zones := map[string]bool{}
	for _, h := range c.EtcdHosts() {
		zones[h.Zone] = true
	}
	if len(c.EtcdHosts()) != 3 || len(zones) != 3 {
		t.Errorf("example has %d members in %d zones, want 3 in 3", len(c.EtcdHosts()), len(zones))
	}
	// Every field of the spec appears in the example (so every field is shown and explained).
	_, lines, err := decodeStrict(ex, "example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range allFieldPaths(reflect.TypeFor[Cluster](), "", false) {
		if strings.HasPrefix(p, "spec.etcd.spares[0].") {
			continue // an optional list, shown commented out (TestExampleSections enables it)
		}
		if _, ok := lines[p]; !ok {
			t.Errorf("example.yaml does not show %s", p)
		}
	}
	// Commented: more comment lines than not.
	if n := strings.Count(string(ex), "#"); n < 40 {
		t.Errorf("example has only %d comments", n)
	}
	ex[0] = 'X' // the caller's copy
	if ExampleSpec()[0] == 'X' {
		t.Error("ExampleSpec returns shared bytes")
	}
}

// allFieldPaths lists the json field paths of t, with lists entered at index 0 and optional
// sections (pointers to structs, e.g. spec.ssh.bastion) entered only when intoPointers.
func allFieldPaths(t reflect.Type, prefix string, intoPointers bool) []string {
	var out []string
	for name, ft := range jsonFields(t) {
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		out = append(out, p)
		switch {
		case ft == durationType:
		case ft.Kind() == reflect.Struct:
			out = append(out, allFieldPaths(ft, p, intoPointers)...)
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct && intoPointers:
			out = append(out, allFieldPaths(ft.Elem(), p, intoPointers)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, allFieldPaths(ft.Elem(), p+"[0]", intoPointers)...)
		}
	}
	return out
}

// enableExampleSections turns every "key: null" section of the example whose fields follow as
// commented lines ("#  field: value" at the key's indentation) into the mapping those lines show,
// as the example tells the reader to do.
func enableExampleSections(ex string) (string, int) {
	nullRE := regexp.MustCompile(`^(\s*)([A-Za-z]+): null(\s+#.*)?$`)
	lines := strings.Split(ex, "\n")
	n := 0
	for i := 0; i < len(lines); i++ {
		m := nullRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], m[1]+"#  ") {
			continue // a null value, not a commented-out section
		}
		n++
		lines[i] = m[1] + m[2] + ":"
		for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], m[1]+"#  "); j++ {
			lines[j] = m[1] + "  " + strings.TrimPrefix(lines[j], m[1]+"#  ")
		}
	}
	return strings.Join(lines, "\n"), n
}

// TestExampleSections: the sections the example shows commented out (bastion, download,
// loadBalancer with its lb hosts) are valid spec text with every field of those sections, and
// following the example's instructions for download (remove binaries, fill in the sha256) gives a
// valid spec.
func TestExampleSections(t *testing.T) {
	ex, n := enableExampleSections(string(ExampleSpec()))
	if n != 8 {
		t.Fatalf("%d commented-out sections, want 8 (hosts[0].ssh, bastion, download, spares, loadBalancer, kubernetes, scheduler, backup):\n%s", n, ex)
	}
	lbHosts := regexp.MustCompile(`(?m)^  #- (\{name: lb-.*)$`)
	if got := len(lbHosts.FindAllString(ex, -1)); got != 2 {
		t.Fatalf("%d commented-out lb hosts, want 2:\n%s", got, ex)
	}
	ex = lbHosts.ReplaceAllString(ex, "  - $1")
	_, lines, err := decodeStrict([]byte(ex), "example.yaml")
	if err != nil {
		t.Fatalf("enabled sections don't decode: %v\n%s", err, ex)
	}
	for _, p := range allFieldPaths(reflect.TypeFor[Cluster](), "", true) {
		if _, ok := lines[p]; !ok {
			t.Errorf("example.yaml does not show %s", p)
		}
	}
	// external is the alternative to hactl's HAProxy + Keepalived ("instead"): a reader uses one.
	extRE := regexp.MustCompile(`(?m)^    external:\n(      .*\n)+`)
	if !extRE.MatchString(ex) {
		t.Fatal("no loadBalancer.external section in the example")
	}
	ex = extRE.ReplaceAllString(ex, "")
	// As enabled: binaries and download both set, and the sha256 is a placeholder.
	_, _, err = Decode([]byte(ex), "example.yaml", exampleDirs(t), nil)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *ValidationError", err)
	}
	var got []string
	for _, fe := range ve.Errors {
		got = append(got, fe.Field)
	}
	if want := []string{"spec.etcd.download", "spec.etcd.download.sha256", "spec.kubernetes.download.kubelet",
		"spec.kubernetes.download.kubeadm", "spec.kubernetes.download.kubectl"}; !slices.Equal(got, want) {
		t.Errorf("errors at %v, want %v\n%v", got, want, err)
	}
	// Binaries removed, sha256 filled in: valid, no warnings.
	binRE := regexp.MustCompile(`(?m)^    binaries:\n(      .*\n)+`)
	if !binRE.MatchString(ex) {
		t.Fatal("no binaries section in the example")
	}
	ex = binRE.ReplaceAllString(ex, "") // etcd's and Kubernetes' binaries
	ex = strings.Replace(ex, "<the tarball's sha256>", strings.Repeat("0123456789ABCDEF", 4), 1)
	ex = strings.ReplaceAll(ex, "<its sha256>", strings.Repeat("0123456789abcdef", 4))
	c, warns, err := Decode([]byte(ex), "example.yaml", exampleDirs(t), nil)
	if err != nil || len(warns) > 0 {
		t.Fatalf("example with bastion and download: %v %v\n%s", err, warns, ex)
	}
	if b := c.Spec.SSH.Bastion; b == nil || b.Address != "bastion.example.com" || b.Port != 22 || b.User != "jump" {
		t.Errorf("bastion %+v", b)
	}
	if d := c.Spec.Etcd.Download; d == nil || d.SHA256 != strings.Repeat("0123456789abcdef", 4) {
		t.Errorf("download %+v", d)
	}
	if lb := c.Spec.LoadBalancer; lb == nil || lb.VIP != "10.0.1.100/24" || lb.Auth == nil || lb.Auth.Env != "HACTL_VRRP_PASSWORD" || lb.Topology != TopologyDedicated {
		t.Errorf("loadBalancer %+v", lb)
	}
	if got := hostNames(c.LBHosts()); !slices.Equal(got, []string{"lb-a", "lb-b"}) {
		t.Errorf("LB hosts %v, want lb-a, lb-b", got)
	}
	if k := c.Spec.Kubernetes; k == nil || k.Version != "v1.37.2" || k.Download.Kubelet == nil || k.Binaries.Kubelet != "" || k.CNI != CNINone || k.NodeSubnet != "10.0.1.0/24" {
		t.Errorf("kubernetes %+v", k)
	}
}

// TestMessagesNeverQuoteKeys: pointing -f at a private key (or pasting one into a field) must not
// print the key.
func TestMessagesNeverQuoteKeys(t *testing.T) {
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACAeh+bJF/LNN5rxN2+cSkOuqnGuQ1/RSmOs+K94dfNPdgAAAJC8MLbfvDC2\n-----END OPENSSH PRIVATE KEY-----\n"
	docs := []string{
		key,
		"apiVersion: hactl.io/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec:\n  ssh:\n    user: [x]\n    port: |\n" + indent(key, "      "),
		"apiVersion: |\n" + indent(key, "  "),
	}
	for _, doc := range docs {
		_, _, err := Decode([]byte(doc), "c.yaml", Dirs{}, nil)
		if err == nil {
			t.Fatalf("%q decoded", doc)
		}
		if strings.Contains(err.Error(), "b3BlbnNzaC1rZXktdjE") || strings.Contains(err.Error(), "AAAAMwAAAAtzc2gtZW") {
			t.Errorf("message quotes the key:\n%v", err)
		}
	}
	long := strings.Repeat("x", 500)
	_, _, err := Decode([]byte("apiVersion: "+long+"\nkind: Cluster\n"), "c.yaml", Dirs{}, nil)
	if err == nil || strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), "(500 characters)") {
		t.Errorf("long value not cut: %v", err)
	}
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+prefix) + "\n"
}

func TestSyntaxErrorHints(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"apiVersion: hactl.io/v1alpha1\nkind: Cluster\nspec:\n\tssh: {}\n", "indent with spaces"},
		{"apiVersion: hactl.io/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec:\n  etcd: {quotaBackendBytes: 99999999999999999999}\n", "integer \"99999999999999999999\" is out of range"},
	} {
		_, _, err := Decode([]byte(tc.doc), "c.yaml", Dirs{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
	// The missing-file hint (hactl init -f) is specload's: TestLoadMissingFileHint.
}

func hostNames(hosts []Host) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return out
}
