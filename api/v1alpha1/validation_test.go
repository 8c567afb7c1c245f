package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
)

// validCluster returns a defaulted, valid 3-member spec with absolute local paths under dir.
func validCluster(dir string) *Cluster {
	c := &Cluster{
		APIVersion: APIVersion, Kind: Kind,
		Metadata: ObjectMeta{Name: "lab"},
		Spec: ClusterSpec{
			SSH: SSH{IdentityFile: "id", KnownHostsFile: "ssh/known_hosts"},
			Hosts: []Host{
				{Name: "a", Address: "10.0.0.1", Zone: "z1", Roles: []Role{RoleEtcd}},
				{Name: "b", Address: "10.0.0.2", Zone: "z2", Roles: []Role{RoleEtcd}},
				{Name: "c", Address: "10.0.0.3", Zone: "z3", Roles: []Role{RoleEtcd}},
			},
			Etcd: Etcd{Version: "v3.5.21", Binaries: EtcdBinaries{Etcd: "etcd", Etcdctl: "etcdctl"}},
		},
	}
	SetDefaults(c, Dirs{Base: dir})
	return c
}

func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Cluster)
		want   []string // error fields, in order
		warns  []string // warning fields
	}{
		{"valid", func(c *Cluster) {}, nil, nil},
		{"no typemeta", func(c *Cluster) { c.APIVersion, c.Kind = "", "" }, []string{"apiVersion", "kind"}, nil},
		{"mapped v4 duplicate", func(c *Cluster) {
			c.Spec.Hosts[1].Address = CanonicalAddress("::ffff:10.0.0.1")
		}, []string{"spec.hosts[1].address"}, nil},
		{"link-local v6", func(c *Cluster) { c.Spec.Hosts[0].Address = "fe80::1" }, []string{"spec.hosts[0].address"}, nil},
		{"bracketed v6", func(c *Cluster) { c.Spec.Hosts[0].Address = "[2001:db8::1]" }, []string{"spec.hosts[0].address"}, nil},
		{"bad ssh port reported once", func(c *Cluster) {
			c.Spec.SSH.Port = 0
			for i := range c.Spec.Hosts {
				c.Spec.Hosts[i].Port = 0
			}
		}, []string{"spec.ssh.port"}, nil},
		{"5 members 2/2/1", func(c *Cluster) {
			c.Spec.Hosts = append(c.Spec.Hosts,
				Host{Name: "d", Address: "10.0.0.4", Port: 22, Zone: "z1", Roles: []Role{RoleEtcd}},
				Host{Name: "e", Address: "10.0.0.5", Port: 22, Zone: "z2", Roles: []Role{RoleEtcd}})
		}, nil, nil},
		{"extra non-etcd host in member zone", func(c *Cluster) {
			c.Spec.Hosts = append(c.Spec.Hosts, Host{Name: "lb", Address: "10.0.0.9", Port: 22, Zone: "z1", Roles: []Role{RoleLB}})
		}, nil, nil},
		{"3 in one zone acknowledged: one warning", func(c *Cluster) {
			for i := range c.Spec.Hosts {
				c.Spec.Hosts[i].Zone = "z1"
			}
			c.Spec.Etcd.AcceptZoneQuorumLoss = true
		}, nil, []string{"spec.hosts[1].zone"}},
		{"heartbeat bad: no ratio error", func(c *Cluster) { c.Spec.Etcd.HeartbeatInterval.Duration = 1500 }, []string{"spec.etcd.heartbeatInterval"}, nil},
		{"election exactly 5x", func(c *Cluster) { c.Spec.Etcd.ElectionTimeout.Duration = 5 * c.Spec.Etcd.HeartbeatInterval.Duration }, nil, nil},
		{"election exactly 50s", func(c *Cluster) {
			c.Spec.Etcd.HeartbeatInterval.Duration = limits.MaxElectionTimeout / 10
			c.Spec.Etcd.ElectionTimeout.Duration = limits.MaxElectionTimeout
		}, nil, nil},
		{"periodic integer hours", func(c *Cluster) { c.Spec.Etcd.AutoCompaction.Retention = "24" }, nil, nil},
		{"periodic zero hours", func(c *Cluster) { c.Spec.Etcd.AutoCompaction.Retention = "0" }, []string{"spec.etcd.autoCompaction.retention"}, nil},
		{"periodic zero duration", func(c *Cluster) { c.Spec.Etcd.AutoCompaction.Retention = "0s" }, []string{"spec.etcd.autoCompaction.retention"}, nil},
		{"revision zero", func(c *Cluster) { c.Spec.Etcd.AutoCompaction = AutoCompaction{Mode: "revision", Retention: "0"} }, nil, nil},
		{"revision negative", func(c *Cluster) { c.Spec.Etcd.AutoCompaction = AutoCompaction{Mode: "revision", Retention: "-5"} }, []string{"spec.etcd.autoCompaction.retention"}, nil},
		{"prerelease version", func(c *Cluster) { c.Spec.Etcd.Version = "v3.6.0-rc.1" }, nil, nil},
		{"version 4.0", func(c *Cluster) { c.Spec.Etcd.Version = "v4.0.0" }, []string{"spec.etcd.version"}, nil},
		{"peer port metrics", func(c *Cluster) { c.Spec.Etcd.PeerPort = limits.EtcdMetricsPort }, []string{"spec.etcd.peerPort"}, nil},
		{"metrics on every member's address: a warning", func(c *Cluster) { c.Spec.Etcd.MetricsAddress = "host" }, nil, []string{"spec.etcd.metricsAddress"}},
		{"metrics on every interface: a warning", func(c *Cluster) { c.Spec.Etcd.MetricsAddress = "::" }, nil, []string{"spec.etcd.metricsAddress"}},
		{"per-host ssh user, key and the same port twice", func(c *Cluster) {
			c.Spec.Hosts[0].SSH = &HostSSH{User: "admin", IdentityFile: "/keys/a", Port: c.Spec.Hosts[0].Port}
		}, nil, nil},
		{"per-host ssh port differs from hosts[*].port", func(c *Cluster) { c.Spec.Hosts[1].SSH = &HostSSH{Port: 2222} }, []string{"spec.hosts[1].ssh.port"}, nil},
		{"per-host ssh user with a host part", func(c *Cluster) { c.Spec.Hosts[2].SSH = &HostSSH{User: "admin@cp-c"} }, []string{"spec.hosts[2].ssh.user"}, nil},
		{"per-host ssh key pasted in", func(c *Cluster) {
			c.Spec.Hosts[0].SSH = &HostSSH{IdentityFile: "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl"}
		}, []string{"spec.hosts[0].ssh.identityFile"}, nil},
		{"metrics address not supported", func(c *Cluster) { c.Spec.Etcd.MetricsAddress = "10.0.0.1" }, []string{"spec.etcd.metricsAddress"}, nil},
		{"command timeout negative", func(c *Cluster) { c.Spec.SSH.CommandTimeout.Duration = -1 }, []string{"spec.ssh.commandTimeout"}, nil},
		{"8 GiB is fine", func(c *Cluster) { c.Spec.Etcd.QuotaBackendBytes = 8 << 30 }, nil, nil},
		{"long name", func(c *Cluster) { c.Metadata.Name = strings.Repeat("a", 64) }, []string{"metadata.name"}, nil},
		{"spares", func(c *Cluster) {
			c.Spec.Etcd.Spares = []Spare{{Name: "s1", Address: "10.0.0.21", Port: 22, Zone: "z1"}, {Name: "s2", Address: "10.0.0.22", Port: 2222, Zone: "z3"}}
		}, nil, nil},
		{"spare that is a member, a host, another spare; no port, no zone", func(c *Cluster) {
			c.Spec.Hosts = append(c.Spec.Hosts, Host{Name: "lb", Address: "10.0.0.9", Port: 22, Zone: "z1", Roles: []Role{RoleLB}})
			c.Spec.Etcd.Spares = []Spare{
				{Name: "a", Address: "10.0.0.21", Port: 22, Zone: "z1"},  // the member a
				{Name: "lb", Address: "10.0.0.22", Port: 22, Zone: "z1"}, // the host lb
				{Name: "s", Address: "10.0.0.2", Port: 22, Zone: "z1"},   // b's address
				{Name: "s", Address: "10.0.0.23", Port: 22, Zone: "z1"},  // the spare before
				{Name: "u", Address: "10.0.0.25", Port: 0},               // no port, no zone
			}
		}, []string{"spec.etcd.spares[0].name", "spec.etcd.spares[1].name", "spec.etcd.spares[2].address", "spec.etcd.spares[3].name",
			"spec.etcd.spares[4].port", "spec.etcd.spares[4].zone"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster("/specs")
			tc.mutate(c)
			errs, warns := Validate(c, nil)
			if got := fields(errs); !slices.Equal(got, tc.want) {
				t.Errorf("errors at %v, want %v\n%v", got, tc.want, errs)
			}
			var wf []string
			for _, w := range warns {
				wf = append(wf, w.Field)
			}
			if !slices.Equal(wf, tc.warns) {
				t.Errorf("warnings at %v, want %v: %v", wf, tc.warns, warns)
			}
		})
	}
}

// TestValidateDataDirAndAddresses covers data dirs that would lose data or clobber system
// directories, control characters in the data dir, loopback addresses and pasted key material.
func TestSpareMessages(t *testing.T) {
	c := validCluster("/specs")
	c.Spec.Etcd.Spares = []Spare{{Name: "b", Address: "10.0.0.21", Port: 22, Zone: "z2"}}
	errs, _ := Validate(c, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "b (spec.hosts[1]) is already an etcd member") {
		t.Errorf("a member as spare: %v", errs)
	}
	c.Spec.Etcd.Spares[0] = Spare{Name: "s", Address: "::FFFF:10.0.0.3", Zone: "z2"}
	SetDefaults(c, Dirs{Base: "/specs"})
	if c.Spec.Etcd.Spares[0].Address != "10.0.0.3" || c.Spec.Etcd.Spares[0].Port != 22 {
		t.Errorf("spare not defaulted: %+v", c.Spec.Etcd.Spares[0])
	}
	if errs, _ := Validate(c, nil); len(errs) != 1 || errs[0].Field != "spec.etcd.spares[0].address" {
		t.Errorf("a spare on c's address: %v", errs)
	}
}

func TestValidateDataDirAndAddresses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *Cluster)
		want   []string
	}{
		{"dedicated dir", func(c *Cluster) { c.Spec.Etcd.DataDir = "/srv/etcd/data" }, nil},
		{"dir with space", func(c *Cluster) { c.Spec.Etcd.DataDir = "/var/lib/my etcd" }, nil},
		{"newline", func(c *Cluster) { c.Spec.Etcd.DataDir = "/var/lib/et\ncd" }, []string{"spec.etcd.dataDir"}},
		{"tab", func(c *Cluster) { c.Spec.Etcd.DataDir = "/var/lib/\tetcd" }, []string{"spec.etcd.dataDir"}},
		{"tmp", func(c *Cluster) { c.Spec.Etcd.DataDir = "/tmp/etcd" }, []string{"spec.etcd.dataDir"}},
		{"var tmp", func(c *Cluster) { c.Spec.Etcd.DataDir = "/var/tmp/etcd" }, []string{"spec.etcd.dataDir"}},
		{"run", func(c *Cluster) { c.Spec.Etcd.DataDir = "/run/etcd" }, []string{"spec.etcd.dataDir"}},
		{"etc", func(c *Cluster) { c.Spec.Etcd.DataDir = "/etc" }, []string{"spec.etcd.dataDir"}},
		{"pki dir", func(c *Cluster) { c.Spec.Etcd.DataDir = "/etc/etcd/pki" }, []string{"spec.etcd.dataDir"}},
		{"bin dir", func(c *Cluster) { c.Spec.Etcd.DataDir = "/usr/local/bin" }, []string{"spec.etcd.dataDir"}},
		{"var lib", func(c *Cluster) { c.Spec.Etcd.DataDir = "/var/lib" }, []string{"spec.etcd.dataDir"}},
		{"tmpx is not tmp", func(c *Cluster) { c.Spec.Etcd.DataDir = "/tmpdata/etcd" }, nil},
		{"loopback among several", func(c *Cluster) { c.Spec.Hosts[1].Address = "127.0.0.2" }, []string{"spec.hosts[1].address"}},
		{"v6 loopback among several", func(c *Cluster) { c.Spec.Hosts[2].Address = "::1" }, []string{"spec.hosts[2].address"}},
		{"loopback single host", func(c *Cluster) {
			c.Spec.Hosts = c.Spec.Hosts[:1]
			c.Spec.Hosts[0].Address = "127.0.0.1"
		}, nil},
		{"key pasted as identityFile", func(c *Cluster) {
			c.Spec.SSH.IdentityFile = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"
		}, []string{"spec.ssh.identityFile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(t.TempDir())
			tc.mutate(c)
			errs, _ := Validate(c, nil)
			if got := fields(errs); !slices.Equal(got, tc.want) {
				t.Fatalf("errors at %v, want %v\n%v", got, tc.want, errs)
			}
			if msg := errs.ToAggregate(); msg != nil && strings.Contains(msg.Error(), "b3BlbnNzaC1rZXktdjE") {
				t.Errorf("message quotes key material: %v", msg)
			}
		})
	}
}

// TestValidateAccessAndDownload covers the issue-3 rules: authentication methods, environment
// variable names, the bastion, and binaries vs download.
func TestValidateAccessAndDownload(t *testing.T) {
	const sum = "3f8b2c5ad0b9d2a4e6f1c0b7a9d8e5f4c3b2a1908f7e6d5c4b3a29180f7e6d5c"
	const tarball = "https://mirror.example.com/etcd/etcd-v3.5.21-linux-amd64.tar.gz"
	download := func(url, sha string) func(c *Cluster) {
		return func(c *Cluster) {
			c.Spec.Etcd.Binaries = EtcdBinaries{}
			c.Spec.Etcd.Download = &EtcdDownload{URL: url, SHA256: sha}
		}
	}
	bastion := func(b Bastion) func(c *Cluster) {
		return func(c *Cluster) {
			c.Spec.SSH.Bastion = &b
			SetDefaults(c, Dirs{Base: "/specs"})
		}
	}
	tests := []struct {
		name   string
		mutate func(c *Cluster)
		want   []string // error fields, in order
		detail string   // substring of the first error's message
		warns  []string // warning fields
	}{
		// authentication
		{"agent never with a key", func(c *Cluster) { c.Spec.SSH.Agent = AgentNever }, nil, "", nil},
		{"agent only (auto)", func(c *Cluster) { c.Spec.SSH.IdentityFile = "" }, nil, "", nil},
		{"agent only (required)", func(c *Cluster) { c.Spec.SSH.IdentityFile, c.Spec.SSH.Agent = "", AgentRequired }, nil, "", nil},
		{"identityFiles only, agent never", func(c *Cluster) {
			c.Spec.SSH.IdentityFile, c.Spec.SSH.Agent = "", AgentNever
			c.Spec.SSH.IdentityFiles = []string{"/k/a", "/k/b"}
		}, nil, "", nil},
		{"no auth method", func(c *Cluster) { c.Spec.SSH.IdentityFile, c.Spec.SSH.Agent = "", AgentNever },
			[]string{"spec.ssh.identityFile"}, "set identityFile (a local private key, e.g. ~/.ssh/id_ed25519), identityFiles (several key files tried in order), or agent: auto or required", nil},
		{"bad agent", func(c *Cluster) { c.Spec.SSH.Agent = "yes" }, []string{"spec.ssh.agent"}, `supported values: "auto", "never", "required"`, nil},
		{"agent is case-sensitive", func(c *Cluster) { c.Spec.SSH.Agent = "Auto" }, []string{"spec.ssh.agent"}, "", nil},
		{"empty identityFiles entry", func(c *Cluster) { c.Spec.SSH.IdentityFiles = []string{"/k/a", ""} }, []string{"spec.ssh.identityFiles[1]"}, "an empty entry", nil},
		{"identityFiles repeats identityFile", func(c *Cluster) { c.Spec.SSH.IdentityFiles = []string{"/k/a", c.Spec.SSH.IdentityFile} },
			[]string{"spec.ssh.identityFiles[1]"}, "already listed as spec.ssh.identityFile", nil},
		{"key pasted into identityFiles", func(c *Cluster) {
			c.Spec.SSH.IdentityFiles = []string{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"}
		}, []string{"spec.ssh.identityFiles[0]"}, "looks like the contents of a private key", nil},

		// environment variable names
		{"env names", func(c *Cluster) {
			c.Spec.SSH.User = "deploy"
			c.Spec.SSH.PassphraseEnv, c.Spec.SSH.Sudo.PasswordEnv = "_KEY_PASS1", "hactl_sudo"
		}, nil, "", nil},
		{"env name starts with a digit", func(c *Cluster) { c.Spec.SSH.PassphraseEnv = "1PASS" }, []string{"spec.ssh.passphraseEnv"}, "must be an environment variable name", nil},
		{"env name with dash", func(c *Cluster) { c.Spec.SSH.PassphraseEnv = "MY-PASS" }, []string{"spec.ssh.passphraseEnv"}, "must be an environment variable name", nil},
		{"env name with $", func(c *Cluster) { c.Spec.SSH.Sudo.PasswordEnv = "${SUDO_PASS}" }, []string{"spec.ssh.sudo.passwordEnv"}, "without $ or braces: SUDO_PASS", nil},
		{"secret with space", func(c *Cluster) { c.Spec.SSH.Sudo.PasswordEnv = "my sudo pw" }, []string{"spec.ssh.sudo.passwordEnv"}, "name the environment variable, don't put the secret here", nil},
		{"secret with symbols", func(c *Cluster) { c.Spec.SSH.PassphraseEnv = "Tr0ub4dor&3" }, []string{"spec.ssh.passphraseEnv"}, "name the environment variable, don't put the secret here", nil},
		{"secret very long", func(c *Cluster) { c.Spec.SSH.PassphraseEnv = strings.Repeat("A", MaxEnvNameLength+1) }, []string{"spec.ssh.passphraseEnv"}, "don't put the secret here", nil},
		{"longest name", func(c *Cluster) { c.Spec.SSH.PassphraseEnv = strings.Repeat("A", MaxEnvNameLength) }, nil, "", nil},
		{"sudo password for root: warning", func(c *Cluster) { c.Spec.SSH.Sudo.PasswordEnv = "SUDO_PASS" }, nil, "", []string{"spec.ssh.sudo.passwordEnv"}},
		{"passphrase without key files: warning", func(c *Cluster) { c.Spec.SSH.IdentityFile, c.Spec.SSH.PassphraseEnv = "", "KEY_PASS" }, nil, "", []string{"spec.ssh.passphraseEnv"}},

		// bastion
		{"bastion by name", bastion(Bastion{Address: "bastion.example.com"}), nil, "", nil},
		{"bastion by IP, own key and port", bastion(Bastion{Address: "203.0.113.10", Port: 2222, User: "jump", IdentityFile: "/k/jump"}), nil, "", nil},
		{"bastion on loopback (a tunnel)", bastion(Bastion{Address: "127.0.0.1", Port: 2200}), nil, "", nil},
		{"bastion without address", bastion(Bastion{User: "jump"}), []string{"spec.ssh.bastion.address"}, "a bastion needs an address", nil},
		{"bastion port too big", bastion(Bastion{Address: "10.9.9.9", Port: 65536}), []string{"spec.ssh.bastion.port"}, "between 1 and 65535", nil},
		{"bastion port negative", bastion(Bastion{Address: "10.9.9.9", Port: -1}), []string{"spec.ssh.bastion.port"}, "", nil},
		{"bastion zone index", bastion(Bastion{Address: "fe80::1%eth0"}), []string{"spec.ssh.bastion.address"}, "zone index (%eth0) can't be used for the bastion", nil},
		{"bastion global v6 with zone", bastion(Bastion{Address: "2001:db8::1%2"}), []string{"spec.ssh.bastion.address"}, "zone index", nil},
		{"bastion link-local v6", bastion(Bastion{Address: "fe80::1"}), []string{"spec.ssh.bastion.address"}, "link-local", nil},
		{"bastion unspecified", bastion(Bastion{Address: "0.0.0.0"}), []string{"spec.ssh.bastion.address"}, "", nil},
		{"bastion with port in address", bastion(Bastion{Address: "bastion.example.com:2222"}), []string{"spec.ssh.bastion.address"}, "set the port in spec.ssh.bastion.port", nil},
		{"bastion bracketed", bastion(Bastion{Address: "[2001:db8::1]"}), []string{"spec.ssh.bastion.address"}, "without a port or brackets", nil},
		{"bastion blank user", bastion(Bastion{Address: "10.9.9.9", User: " "}), []string{"spec.ssh.bastion.user"}, "", nil},
		{"bastion key pasted", bastion(Bastion{Address: "10.9.9.9", IdentityFile: "-----BEGIN OPENSSH PRIVATE KEY-----"}), []string{"spec.ssh.bastion.identityFile"}, "", nil},

		// binaries or download
		{"download", download(tarball, sum), nil, "", nil},
		{"download over http with a port", download("http://10.0.0.100:8080/etcd.tar.gz", sum), nil, "", nil},
		{"download from a v6 mirror", download("http://[2001:db8::100]/etcd.tar.gz", sum), nil, "", nil},
		{"both binaries and download", func(c *Cluster) { c.Spec.Etcd.Download = &EtcdDownload{URL: tarball, SHA256: sum} },
			[]string{"spec.etcd.download"}, "set exactly one of binaries", nil},
		{"only etcdctl and download", func(c *Cluster) {
			download(tarball, sum)(c)
			c.Spec.Etcd.Binaries.Etcdctl = "/bin/etcdctl"
		}, []string{"spec.etcd.download"}, "", nil},
		{"neither", func(c *Cluster) { c.Spec.Etcd.Binaries = EtcdBinaries{} }, []string{"spec.etcd.binaries.etcd"}, "or instead set download", nil},
		{"url without sha256", download(tarball, ""), []string{"spec.etcd.download.sha256"}, "URL without sha256", nil},
		{"sha256 too short", download(tarball, sum[:40]), []string{"spec.etcd.download.sha256"}, "sha256 of the wrong length: 40 characters, want 64 hex digits", nil},
		{"sha256 too long", download(tarball, sum+"0"), []string{"spec.etcd.download.sha256"}, "65 characters", nil},
		{"sha256 not hex", download(tarball, "g"+sum[1:]), []string{"spec.etcd.download.sha256"}, "hex digits only", nil},
		{"sha256 with prefix", download(tarball, "sha256:"+sum), []string{"spec.etcd.download.sha256"}, `without the "sha256:" prefix`, nil},
		{"sha256sum line", download(tarball, sum+"  etcd.tar.gz"), []string{"spec.etcd.download.sha256"}, "leave that out", nil},
		{"no url", download("", sum), []string{"spec.etcd.download.url"}, "set the http(s) URL", nil},
		{"ftp url", download("ftp://mirror.example.com/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, `got scheme "ftp"`, nil},
		{"file url", download("file:///tmp/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, `got scheme "file"`, nil},
		{"path only", download("/srv/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, `got scheme ""`, nil},
		{"no host", download("https:///etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "must name a host", nil},
		{"opaque", download("https:mirror/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "must name a host", nil},
		{"unparsable", download("https://mirror.example.com:80x/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "is not a valid URL", nil},
		{"port out of range", download("https://mirror.example.com:70000/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "port 70000", nil},
		{"space", download("https://mirror.example.com/my etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "percent-encode", nil},
		{"space and credentials", download("https://ci:hunter2@mirror.example.com/my etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "percent-encode", nil},
		{"unparsable with credentials", download("https://ci:hunter2@mirror.example.com:80x/e.tgz", sum), []string{"spec.etcd.download.url"}, "is not a valid URL", nil},
		{"credentials", download("https://ci:hunter2@mirror.example.com/etcd.tar.gz", sum), []string{"spec.etcd.download.url"},
			"must not contain credentials (user:password@): the URL is written to the debug log and to the hosts' commands; the URL without them is https://mirror.example.com/etcd.tar.gz", nil},
		{"token as user", download("https://ghp_abcdef123456@mirror.example.com/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "must not contain credentials", nil},
		{"zone index in url", download("http://[fe80::1%25eth0]/etcd.tar.gz", sum), []string{"spec.etcd.download.url"}, "zone index (%eth0) can't be used", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster("/specs")
			tc.mutate(c)
			errs, warns := Validate(c, nil)
			if got := fields(errs); !slices.Equal(got, tc.want) {
				t.Fatalf("errors at %v, want %v\n%v", got, tc.want, errs)
			}
			if tc.detail != "" && !strings.Contains(errs[0].Error(), tc.detail) {
				t.Errorf("error %q lacks %q", errs[0].Error(), tc.detail)
			}
			var wf []string
			for _, w := range warns {
				wf = append(wf, w.Field)
			}
			if !slices.Equal(wf, tc.warns) {
				t.Errorf("warnings at %v, want %v: %v", wf, tc.warns, warns)
			}
			// Secrets written where a name or URL belongs are never echoed.
			if msg := errs.ToAggregate(); msg != nil {
				for _, secret := range []string{"hunter2", "ghp_abcdef123456", "Tr0ub4dor", "my sudo pw", "b3BlbnNzaC1rZXktdjE"} {
					if strings.Contains(msg.Error(), secret) {
						t.Errorf("message quotes %q: %v", secret, msg)
					}
				}
			}
		})
	}
}

func TestZoneHoldingQuorum(t *testing.T) {
	for _, tc := range []struct {
		zones []string
		zone  string
		at    []int
	}{
		{[]string{"a", "b", "c"}, "", nil},
		{[]string{"a", "b", "a"}, "a", []int{0, 2}},
		{[]string{"a", "a", "b", "b", "c"}, "", nil},
		{[]string{"a", "b", "a", "c", "a"}, "a", []int{0, 2, 4}},
		{[]string{"a", "b", "a", "a", "a"}, "a", []int{0, 2, 3, 4}}, // every member of the zone
		{[]string{"", "", "a"}, "", nil},                            // a missing zone is not one zone
		{[]string{"a"}, "a", []int{0}},
		{nil, "", nil},
	} {
		zone, at := ZoneHoldingQuorum(tc.zones)
		if zone != tc.zone || fmt.Sprint(at) != fmt.Sprint(tc.at) {
			t.Errorf("ZoneHoldingQuorum(%q) = %q %v, want %q %v", tc.zones, zone, at, tc.zone, tc.at)
		}
	}
}

// TestExplicitZeroPorts: a port written as 0 where SetDefaults would fill it in (a host's ssh.port,
// a spare's port, the external load balancer's port) is refused with its path and the default,
// like every other field of zeroDefault, instead of becoming the default without a word.
func TestExplicitZeroPorts(t *testing.T) {
	example := string(ExampleSpec())
	for _, tc := range []struct{ old, new, path string }{
		{"    ssh: null\n", "    ssh: {port: 0}\n", "spec.hosts[0].ssh.port"},
		{"    spares: null\n", "    spares: [{name: spare-a, address: 10.0.1.91, port: 0, zone: az-a}]\n", "spec.etcd.spares[0].port"},
		{"  loadBalancer: null\n", "  loadBalancer: {external: {address: api.example.com, port: 0}}\n", "spec.loadBalancer.external.port"},
	} {
		if !strings.Contains(example, tc.old) {
			t.Fatalf("the example lacks %q", tc.old)
		}
		_, _, err := Decode([]byte(strings.Replace(example, tc.old, tc.new, 1)), "cluster.yaml", Dirs{Base: t.TempDir()}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.path+`: Invalid value: "0": must be a TCP port between 1 and 65535; remove the field for the default`) {
			t.Errorf("%s: 0: %v, want it refused with the default named", tc.path, err)
		}
	}
}
