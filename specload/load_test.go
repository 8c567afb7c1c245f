package specload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
)

type exitCoder interface{ ExitCode() int }

// TestInvalidSpecs loads every testdata/invalid-*.yaml and checks the field path and line the error
// names, and the exit code.
func TestInvalidSpecs(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	tests := []struct {
		file  string
		field string // exact field path of one reported problem ("" = not about a field)
		line  int    // line reported for it (0 = don't check)
	}{
		{"invalid-unknown-top-level-field.yaml", "status", 25},
		{"invalid-unknown-nested-field.yaml", "spec.hosts[1].zonee", 15},
		{"invalid-unknown-etcd-field.yaml", "spec.etcd.snapshotCount", 25},
		{"invalid-wrong-type-int.yaml", "spec.ssh.port", 8},
		{"invalid-wrong-type-list.yaml", "spec.hosts[2].roles", 20},
		{"invalid-wrong-type-string.yaml", "metadata.name", 4},
		{"invalid-wrong-type-duration.yaml", "spec.etcd.heartbeatInterval", 25},
		{"invalid-wrong-type-bool.yaml", "spec.etcd.acceptZoneQuorumLoss", 25},
		{"invalid-duplicate-key.yaml", "spec.hosts[0].zone", 12},
		{"invalid-two-documents.yaml", "", 25},
		{"invalid-empty.yaml", "", 1},
		{"invalid-yaml-syntax.yaml", "", 19}, // the line go.yaml.in/yaml/v3 reports (its parser errors are one line early)
		{"invalid-bad-api-version.yaml", "apiVersion", 1},
		{"invalid-bad-kind.yaml", "kind", 2},
		{"invalid-missing-name.yaml", "metadata.name", 3},
		{"invalid-bad-name.yaml", "metadata.name", 4},
		{"invalid-no-hosts.yaml", "spec.hosts", 8},
		{"invalid-bad-host-name.yaml", "spec.hosts[1].name", 13},
		{"invalid-duplicate-host-name.yaml", "spec.hosts[2].name", 17},
		{"invalid-duplicate-address.yaml", "spec.hosts[2].address", 18},
		{"invalid-duplicate-address-ipv6.yaml", "spec.hosts[1].address", 14},
		{"invalid-dns-address.yaml", "spec.hosts[1].address", 14},
		{"invalid-bad-ip.yaml", "spec.hosts[1].address", 14},
		{"invalid-missing-address.yaml", "spec.hosts[1].address", 13},
		{"invalid-zone-index.yaml", "spec.hosts[0].address", 10},
		{"invalid-unspecified-address.yaml", "spec.hosts[0].address", 10},
		{"invalid-multicast-address.yaml", "spec.hosts[2].address", 18},
		{"invalid-broadcast-address.yaml", "spec.hosts[2].address", 18},
		{"invalid-bad-host-port.yaml", "spec.hosts[2].port", 20},
		{"invalid-bad-ssh-port.yaml", "spec.ssh.port", 8},
		{"invalid-missing-zone.yaml", "spec.hosts[1].zone", 13},
		{"invalid-bad-zone.yaml", "spec.hosts[1].zone", 15},
		{"invalid-unknown-role.yaml", "spec.hosts[2].roles[1]", 20},
		{"invalid-duplicate-role.yaml", "spec.hosts[2].roles[1]", 22},
		{"invalid-no-roles.yaml", "spec.hosts[2].roles", 20},
		{"invalid-no-etcd-members.yaml", "spec.hosts", 8},
		{"invalid-2-members.yaml", "spec.hosts", 8},
		{"invalid-4-members.yaml", "spec.hosts", 8},
		{"invalid-7-members.yaml", "spec.hosts", 8},
		{"invalid-zone-quorum-3-in-2-zones.yaml", "spec.hosts[2].zone", 19},
		{"invalid-zone-quorum-5-with-3-in-one-zone.yaml", "spec.hosts[4].zone", 27},
		{"invalid-heartbeat-not-whole-ms.yaml", "spec.etcd.heartbeatInterval", 25},
		{"invalid-heartbeat-zero-negative.yaml", "spec.etcd.heartbeatInterval", 25},
		{"invalid-election-below-5x-heartbeat.yaml", "spec.etcd.electionTimeout", 26},
		{"invalid-election-above-50s.yaml", "spec.etcd.electionTimeout", 25},
		{"invalid-election-not-whole-ms.yaml", "spec.etcd.electionTimeout", 25},
		{"invalid-relative-datadir.yaml", "spec.etcd.dataDir", 25},
		{"invalid-root-datadir.yaml", "spec.etcd.dataDir", 25},
		{"invalid-unclean-datadir.yaml", "spec.etcd.dataDir", 25},
		{"invalid-client-port-equals-peer-port.yaml", "spec.etcd.peerPort", 21}, // peerPort is defaulted: the line is spec.etcd's
		{"invalid-metrics-port.yaml", "spec.etcd.clientPort", 25},
		{"invalid-bad-peer-port.yaml", "spec.etcd.peerPort", 25},
		{"invalid-compaction-mode.yaml", "spec.etcd.autoCompaction.mode", 25},
		{"invalid-revision-retention.yaml", "spec.etcd.autoCompaction.retention", 27},
		{"invalid-revision-retention-missing.yaml", "spec.etcd.autoCompaction.retention", 25},
		{"invalid-periodic-retention.yaml", "spec.etcd.autoCompaction.retention", 26},
		{"invalid-version-format.yaml", "spec.etcd.version", 22},
		{"invalid-version-leading-zero.yaml", "spec.etcd.version", 22}, // semver: no leading zeros (etcd.CheckUpgrade could not compare it)
		{"invalid-version-unsupported.yaml", "spec.etcd.version", 22},
		{"invalid-missing-version.yaml", "spec.etcd.version", 21},
		{"invalid-missing-etcd-binary.yaml", "spec.etcd.binaries.etcd", 23},
		{"invalid-no-auth-method.yaml", "spec.ssh.identityFile", 6}, // identityFile absent: the line is spec.ssh's
		{"invalid-bad-agent.yaml", "spec.ssh.agent", 8},
		{"invalid-bad-env-name.yaml", "spec.ssh.passphraseEnv", 8},
		{"invalid-secret-env-name.yaml", "spec.ssh.sudo.passwordEnv", 10},
		{"invalid-bastion-no-address.yaml", "spec.ssh.bastion.address", 8},
		{"invalid-bastion-bad-port.yaml", "spec.ssh.bastion.port", 10},
		{"invalid-bastion-zone-index.yaml", "spec.ssh.bastion.address", 9},
		{"invalid-download-no-sha256.yaml", "spec.etcd.download.sha256", 23},
		{"invalid-download-sha256-length.yaml", "spec.etcd.download.sha256", 25},
		{"invalid-download-bad-scheme.yaml", "spec.etcd.download.url", 24},
		{"invalid-download-credentials.yaml", "spec.etcd.download.url", 24},
		{"invalid-binaries-and-download.yaml", "spec.etcd.download", 25},
		{"invalid-no-binaries-no-download.yaml", "spec.etcd.binaries.etcd", 21},
		{"invalid-quota-negative.yaml", "spec.etcd.quotaBackendBytes", 25},
		{"invalid-max-parallel.yaml", "spec.ssh.maxParallel", 8},
		{"invalid-connect-timeout.yaml", "spec.ssh.connectTimeout", 8},
		{"invalid-empty-ssh-user.yaml", "spec.ssh.user", 8},
		// spec.loadBalancer
		{"invalid-lb-vip-no-prefix.yaml", "spec.loadBalancer.vip", 20},
		{"invalid-lb-vip-not-cidr.yaml", "spec.loadBalancer.vip", 20},
		{"invalid-lb-vip-outside-subnet.yaml", "spec.loadBalancer.vip", 20},
		{"invalid-lb-vip-is-host-address.yaml", "spec.loadBalancer.vip", 20},
		{"invalid-lb-vip-network-address.yaml", "spec.loadBalancer.vip", 20},
		{"invalid-lb-virtual-router-id.yaml", "spec.loadBalancer.virtualRouterID", 21},
		{"invalid-lb-advert-interval-fraction.yaml", "spec.loadBalancer.advertInterval", 21},
		{"invalid-lb-advert-interval-range.yaml", "spec.loadBalancer.advertInterval", 21},
		{"invalid-lb-auth-file-and-env.yaml", "spec.loadBalancer.auth.env", 23},
		{"invalid-lb-auth-empty.yaml", "spec.loadBalancer.auth", 21},
		{"invalid-lb-auth-secret-as-env.yaml", "spec.loadBalancer.auth.env", 22},
		{"invalid-lb-priority-range.yaml", "spec.loadBalancer.priorities[lb-a]", 22},
		{"invalid-lb-priority-not-lb-host.yaml", "spec.loadBalancer.priorities[cp-a]", 24},
		{"invalid-lb-priorities-duplicate.yaml", "spec.loadBalancer.priorities[lb-b]", 23},
		{"invalid-lb-priorities-missing.yaml", "spec.loadBalancer.priorities", 21},
		{"invalid-lb-weight-cannot-fail-over.yaml", "spec.loadBalancer.checkWeight", 24},
		{"invalid-lb-priorities-cannot-fail-over.yaml", "spec.loadBalancer.checkWeight", 24},
		{"invalid-lb-check-weight-range.yaml", "spec.loadBalancer.checkWeight", 21},
		{"invalid-lb-check-fall-range.yaml", "spec.loadBalancer.checkFall", 21},
		{"invalid-lb-nopreempt-weighted.yaml", "spec.loadBalancer.nopreempt", 21},
		{"invalid-lb-unicast-single-host.yaml", "spec.loadBalancer.mode", 18},
		{"invalid-lb-multicast-single-host.yaml", "spec.loadBalancer.topology", 18},
		{"invalid-lb-dedicated-no-lb-hosts.yaml", "spec.loadBalancer.topology", 17},
		{"invalid-lb-colocated-same-port.yaml", "spec.loadBalancer.frontendPort", 17},
		{"invalid-lb-no-backends.yaml", "spec.hosts", 9},
		{"invalid-lb-no-vip.yaml", "spec.loadBalancer.vip", 19},
		{"invalid-private-address.yaml", "spec.hosts[0].privateAddress", 10},
		{"invalid-host-bastion.yaml", "spec.hosts[1].ssh.bastion.address", 16},
		{"invalid-lb-external-with-keepalived.yaml", "spec.loadBalancer.vip", 21},
		{"invalid-lb-external-address.yaml", "spec.loadBalancer.external.address", 19},
		{"invalid-lb-external-is-apiserver.yaml", "spec.loadBalancer.external.address", 19},
		{"invalid-lb-duplicate-backends.yaml", "spec.hosts[2]", 12},
		{"invalid-lb-check-fall.yaml", "spec.loadBalancer.healthCheck.fall", 22},
		{"invalid-lb-check-rise.yaml", "spec.loadBalancer.healthCheck.rise", 22},
		{"invalid-lb-check-interval.yaml", "spec.loadBalancer.healthCheck.interval", 22},
		{"invalid-lb-bad-mode.yaml", "spec.loadBalancer.mode", 21},
		{"invalid-lb-bad-topology.yaml", "spec.loadBalancer.topology", 21},
		{"invalid-lb-frontend-local-port.yaml", "spec.loadBalancer.frontendPort", 21},
		{"invalid-lb-bad-interface.yaml", "spec.loadBalancer.interface", 21},
		{"invalid-lb-wrong-type-priorities.yaml", "spec.loadBalancer.priorities", 21},
		// explicit zeros that defaulting would have replaced silently
		{"invalid-zero-virtual-router-id.yaml", "spec.loadBalancer.virtualRouterID", 21},
		{"invalid-zero-host-port.yaml", "spec.hosts[2].port", 20},
		{"invalid-zero-heartbeat.yaml", "spec.etcd.heartbeatInterval", 25},
		{"invalid-zero-check-fall.yaml", "spec.loadBalancer.checkFall", 21},
	}

	// Every invalid file has a case, and there are enough of them.
	files, _ := filepath.Glob("testdata/invalid-*.yaml")
	if len(files) < 30 || len(files) != len(tests) {
		t.Errorf("%d invalid-*.yaml files, %d cases; want one case per file and at least 30", len(files), len(tests))
	}
	for _, f := range files {
		if !slices.ContainsFunc(tests, func(tc struct {
			file  string
			field string
			line  int
		}) bool {
			return tc.file == filepath.Base(f)
		}) {
			t.Errorf("no test case for %s", f)
		}
	}

	for _, tc := range tests {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			c, _, err := Load(filepath.Join("testdata", tc.file))
			if err == nil {
				t.Fatalf("Load succeeded (%+v), want an error", c)
			}
			t.Logf("%v", err)
			var ec exitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Errorf("error %T has no ExitCode 2", err)
			}
			got := locate(t, err)
			want := problemAt{tc.field, tc.line}
			if !slices.Contains(got, want) {
				t.Errorf("problems at %v, want one at %v", got, want)
			}
			// The rendered message carries "file:line: field: " for that problem.
			prefix := fmt.Sprintf("%s:%d: ", filepath.Join("testdata", tc.file), tc.line)
			if tc.field != "" {
				prefix += tc.field + ": "
			}
			if !strings.Contains(err.Error(), prefix) {
				t.Errorf("error text lacks %q:\n%v", prefix, err)
			}
		})
	}
}

type problemAt struct {
	field string
	line  int
}

// locate lists (field, line) of every problem in a load error.
func locate(t *testing.T, err error) []problemAt {
	t.Helper()
	var out []problemAt
	var de *v1alpha1.DecodeError
	var ve *v1alpha1.ValidationError
	switch {
	case errors.As(err, &de):
		for _, p := range de.Problems {
			out = append(out, problemAt{p.Field, p.Line})
		}
	case errors.As(err, &ve):
		for _, fe := range ve.Errors {
			out = append(out, problemAt{fe.Field, ve.Line(fe.Field)})
		}
	default:
		t.Fatalf("error %T is neither *DecodeError nor *ValidationError: %v", err, err)
	}
	return out
}

func TestValidSpecs(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	testdata, _ := filepath.Abs("testdata")
	tests := []struct {
		file     string
		members  int
		warnings []v1alpha1.Warning // Message is matched as a substring
		check    func(t *testing.T, c *v1alpha1.Cluster)
	}{
		{"valid-3-members.yaml", 3, nil, nil},
		{"valid-5-members.yaml", 5, nil, nil},
		{"valid-single-member.yaml", 1, []v1alpha1.Warning{{Field: "spec.hosts[0]", Message: "NOT highly available: a single member has no fault tolerance"}}, nil},
		{"valid-ipv6.yaml", 3, nil, nil},
		{"valid-weak-topology-acknowledged.yaml", 3, []v1alpha1.Warning{{Field: "spec.hosts[1].zone", Message: `losing zone "az-a" loses quorum`}}, nil},
		{"valid-large-quota.yaml", 3, []v1alpha1.Warning{{Field: "spec.etcd.quotaBackendBytes", Message: "above 8 GiB"}}, nil},
		{"valid-download.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			d := c.Spec.Etcd.Download
			want := &v1alpha1.EtcdDownload{
				URL:    "https://github.com/etcd-io/etcd/releases/download/v3.6.16/etcd-v3.6.16-linux-amd64.tar.gz",
				SHA256: "3f8b2c5ad0b9d2a4e6f1c0b7a9d8e5f4c3b2a1908f7e6d5c4b3a29180f7e6d5c", // written upper case
			}
			if !reflect.DeepEqual(d, want) || c.Spec.Etcd.Binaries != (v1alpha1.EtcdBinaries{}) {
				t.Errorf("download %+v, binaries %+v; want %+v and no binaries", d, c.Spec.Etcd.Binaries, want)
			}
		}},
		{"valid-bastion.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			want := &v1alpha1.Bastion{Address: "bastion.example.com", Port: 22, User: "deploy",
				IdentityFile:   filepath.Join(testdata, "keys", "id_bastion"),
				KnownHostsFile: filepath.Join(testdata, "known_hosts")}
			if !reflect.DeepEqual(c.Spec.SSH.Bastion, want) {
				t.Errorf("bastion %+v, want %+v", c.Spec.SSH.Bastion, want)
			}
			wantFiles := []string{filepath.Join(testdata, "keys", "id_rsa"), filepath.Join(home, ".ssh", "id_ecdsa")}
			if !slices.Equal(c.Spec.SSH.IdentityFiles, wantFiles) {
				t.Errorf("identityFiles %v, want %v", c.Spec.SSH.IdentityFiles, wantFiles)
			}
		}},
		{"valid-agent-only.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			if s := c.Spec.SSH; s.Agent != v1alpha1.AgentRequired || s.IdentityFile != "" || len(s.IdentityFiles) != 0 {
				t.Errorf("ssh %+v, want agent required and no key files", s)
			}
		}},
		{"valid-lb-dedicated.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			want := &v1alpha1.LoadBalancer{VIP: "172.28.0.100/24", VirtualRouterID: 51, Mode: "unicast", AdvertInterval: v1alpha1.Duration{Duration: 500 * time.Millisecond},
				Topology: "dedicated", FrontendPort: 6443, APIServerPort: 6443, CheckWeight: new(int), CheckFall: 1,
				HealthCheck: v1alpha1.LBHealthCheck{Interval: v1alpha1.Duration{Duration: 2 * time.Second}, Fall: 3, Rise: 2}}
			if !reflect.DeepEqual(c.Spec.LoadBalancer, want) {
				t.Errorf("loadBalancer %+v, want %+v", c.Spec.LoadBalancer, want)
			}
			if got := hostNames(c.LBHosts()); !slices.Equal(got, []string{"lb-a", "lb-b"}) {
				t.Errorf("LB hosts %v, want lb-a, lb-b", got)
			}
		}},
		{"valid-lb-colocated.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			lb := c.Spec.LoadBalancer
			if lb.HealthCheck.CAFile != filepath.Join(testdata, "pki", "kube-ca.crt") || lb.Auth.Env != "HACTL_VRRP_PASSWORD" ||
				lb.FrontendPort != 8443 || lb.Mode != v1alpha1.LBModeMulticast || lb.HealthCheck.Interval.Duration != 1500*time.Millisecond {
				t.Errorf("loadBalancer %+v", lb)
			}
			if got := hostNames(c.LBHosts()); !slices.Equal(got, []string{"cp-a", "cp-b", "cp-c"}) {
				t.Errorf("LB hosts %v, want the control-plane hosts", got)
			}
		}},
		{"valid-private-address.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			if h := c.Spec.Hosts[2]; h.PrivateAddress != "fd00::d" || h.PeerAddress() != "fd00::d" {
				t.Errorf("privateAddress %q (canonicalised), peer address %q", h.PrivateAddress, h.PeerAddress())
			}
			ms, err := etcd.MembersFromSpec(c)
			if err != nil || ms[0].PeerURL() != "https://10.0.0.11:2380" || ms[0].ClientURL() != "https://192.0.2.11:2379" || ms[2].PeerURL() != "https://[fd00::d]:2380" || len(ms[0].Addrs()) != 2 {
				t.Errorf("members %+v %v: peer URLs on the privateAddress, client URLs on the address, both in the SANs", ms, err)
			}
		}},
		{"valid-lb-external.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			if c.ManagedLB() != nil || len(c.LBHosts()) != 0 {
				t.Errorf("external: ManagedLB %+v, LB hosts %v, want none", c.ManagedLB(), hostNames(c.LBHosts()))
			}
			if h, p, ok := c.APIEndpoint(); h != "api.lab.example.com" || p != 8443 || !ok {
				t.Errorf("APIEndpoint = %s %d %v, want api.lab.example.com 8443", h, p, ok)
			}
			if lb := c.Spec.LoadBalancer; lb.VirtualRouterID != 0 || lb.Topology != "" || lb.APIServerPort != 6443 {
				t.Errorf("external got HAProxy/Keepalived defaults: %+v", lb)
			}
		}},
		{"valid-lb-ipv6.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			lb := c.Spec.LoadBalancer
			if lb.VIP != "fd00:db8:28::100/64" || !lb.Nopreempt || lb.CheckWeight == nil || *lb.CheckWeight != 0 {
				t.Errorf("loadBalancer %+v (VIP canonicalised, nopreempt, checkWeight 0)", lb)
			}
		}},
		{"valid-sudo-user.yaml", 3, nil, func(t *testing.T, c *v1alpha1.Cluster) {
			if s := c.Spec.SSH; s.User != "deploy" || s.Sudo.PasswordEnv != "HACTL_SUDO_PASSWORD" || s.PassphraseEnv != "HACTL_SSH_PASSPHRASE" || s.Agent != v1alpha1.AgentAuto {
				t.Errorf("ssh %+v, want user deploy, sudo.passwordEnv HACTL_SUDO_PASSWORD, passphraseEnv HACTL_SSH_PASSPHRASE, agent auto", s)
			}
		}},
	}
	files, _ := filepath.Glob("testdata/valid-*.yaml")
	if len(files) != len(tests) {
		t.Errorf("%d valid-*.yaml files, %d cases", len(files), len(tests))
	}
	for _, tc := range tests {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			c, warns, err := Load(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := len(c.EtcdHosts()); got != tc.members {
				t.Errorf("%d etcd members, want %d", got, tc.members)
			}
			if len(warns) != len(tc.warnings) {
				t.Fatalf("warnings %v, want %v", warns, tc.warnings)
			}
			for i, w := range tc.warnings {
				if warns[i].Field != w.Field || !strings.Contains(warns[i].Message, w.Message) {
					t.Errorf("warning %d = %v, want %s: ...%s...", i, warns[i], w.Field, w.Message)
				}
			}
			// Local paths resolve against the spec file's directory; ~ is $HOME.
			if got, want := c.Spec.Etcd.Binaries.Etcd, filepath.Join(testdata, "bin", "etcd"); got != want && c.Spec.Etcd.Download == nil {
				t.Errorf("binaries.etcd = %q, want %q", got, want)
			}
			if got, want := c.Spec.StateDir, filepath.Join(home, ".hactl", c.Metadata.Name); got != want {
				t.Errorf("stateDir = %q, want %q", got, want)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func hostNames(hosts []v1alpha1.Host) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return out
}

func TestIPv6Canonicalised(t *testing.T) {
	c, _, err := Load("testdata/valid-ipv6.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range c.Spec.Hosts {
		got = append(got, h.Address)
	}
	want := []string{"2001:db8::11", "2001:db8::12", "10.0.0.13"}
	if !slices.Equal(got, want) {
		t.Errorf("addresses %v, want %v", got, want)
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct{ file, want string }{
		{"invalid-unknown-nested-field.yaml", `invalid-unknown-nested-field.yaml:15: spec.hosts[1].zonee: unknown field "zonee"; did you mean "zone"?`},
		{"invalid-wrong-type-int.yaml", `invalid-wrong-type-int.yaml:8: spec.ssh.port: must be an integer, got string "twenty-two"`},
		{"invalid-duplicate-key.yaml", `invalid-duplicate-key.yaml:12: spec.hosts[0].zone: duplicate key "zone" (first set on line 11); keep only one`},
		{"invalid-bad-api-version.yaml", `invalid-bad-api-version.yaml:1: apiVersion: unsupported value "hactl.io/v1beta1": this hactl reads only hactl.io/v1alpha1; set ` + "`apiVersion: hactl.io/v1alpha1`"},
		{"invalid-two-documents.yaml", `invalid-two-documents.yaml:25: a second YAML document starts here`},
		{"invalid-4-members.yaml", `invalid-4-members.yaml:8: spec.hosts: Invalid value: 4: 4 hosts have role etcd; an even member count is refused: 4 members tolerate 1 failure(s), no more than 3 members do, yet need a larger quorum (3 instead of 2)`},
		{"invalid-zone-quorum-3-in-2-zones.yaml", `invalid-zone-quorum-3-in-2-zones.yaml:19: spec.hosts[2].zone: Invalid value: "az-a": zone "az-a" holds 2 of the 3 etcd members (cp-a, cp-c) and a quorum is 2`},
		{"invalid-no-auth-method.yaml", `invalid-no-auth-method.yaml:6: spec.ssh.identityFile: Required value: no SSH authentication method: set identityFile (a local private key, e.g. ~/.ssh/id_ed25519), identityFiles (several key files tried in order), or agent: auto or required`},
		{"invalid-bad-agent.yaml", `spec.ssh.agent: Unsupported value: "sometimes": supported values: "auto", "never", "required"`},
		{"invalid-bad-env-name.yaml", `spec.ssh.passphraseEnv: Invalid value: "(value not shown)": must be an environment variable name`},
		{"invalid-secret-env-name.yaml", `spec.ssh.sudo.passwordEnv: Invalid value: "(value not shown)": looks like a secret, not an environment variable name: name the environment variable, don't put the secret here, e.g. HACTL_SUDO_PASSWORD`},
		{"invalid-bastion-no-address.yaml", `spec.ssh.bastion.address: Required value: a bastion needs an address`},
		{"invalid-bastion-bad-port.yaml", `spec.ssh.bastion.port: Invalid value: 70000: the bastion's SSH port must be a TCP port between 1 and 65535`},
		{"invalid-bastion-zone-index.yaml", `spec.ssh.bastion.address: Invalid value: "fe80::1%eth0": an IPv6 zone index (%eth0) can't be used for the bastion`},
		{"invalid-download-no-sha256.yaml", `invalid-download-no-sha256.yaml:23: spec.etcd.download.sha256: Required value: URL without sha256`},
		{"invalid-download-sha256-length.yaml", `spec.etcd.download.sha256: Invalid value: "3f8b2c5ad0b9d2a4e6f1c0b7a9d8e5f4c3b2a1908f7e6d5c4b3a29180f7e6d5": sha256 of the wrong length: 63 characters, want 64 hex digits`},
		{"invalid-download-bad-scheme.yaml", `must be an http or https URL, got scheme "ftp"`},
		{"invalid-download-credentials.yaml", `spec.etcd.download.url: Invalid value: "(value not shown: it contains credentials)": must not contain credentials (user:password@): the URL is written to the debug log and to the hosts' commands; the URL without them is https://mirror.example.com/etcd/etcd-v3.6.16-linux-amd64.tar.gz`},
		{"invalid-binaries-and-download.yaml", `spec.etcd.download: Forbidden: spec.etcd.binaries is set too: set exactly one of binaries`},
		{"invalid-no-binaries-no-download.yaml", `or instead set download: {url, sha256}`},
		{"invalid-dns-address.yaml", `etcd peer URLs and certificate SANs use the IP`},
		{"invalid-zone-index.yaml", `an IPv6 zone index (%eth0) is not allowed`},
		{"invalid-relative-datadir.yaml", `must be an absolute path on the member hosts`},
	}
	for _, tc := range tests {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Decode(data, tc.file, "/specs")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error\n%v\nwant it to contain\n%s", tc.file, err, tc.want)
		}
		// Secrets put in the spec by mistake are never echoed.
		for _, secret := range []string{"s3cr3t", "horse battery"} {
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("%s: error quotes the secret %q:\n%v", tc.file, secret, err)
			}
		}
	}
}

// TestAllProblemsAtOnce: decode problems are all reported together, and so are rule violations.
func TestAllProblemsAtOnce(t *testing.T) {
	decodeBad := `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: x, labels: {}}
spec:
  ssh: {port: "22"}
  hosts:
  - {name: a, address: 10.0.0.1, zone: z, roles: [etcd], zonee: z}
  etcd: {heartbeatInterval: 100}
`
	_, _, err := Decode([]byte(decodeBad), "c.yaml", "")
	var de *v1alpha1.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("want *DecodeError, got %v", err)
	}
	want := []problemAt{{"metadata.labels", 3}, {"spec.ssh.port", 5}, {"spec.hosts[0].zonee", 7}, {"spec.etcd.heartbeatInterval", 8}}
	if got := locate(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("problems %v, want %v", got, want)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d lines, want 4:\n%v", n, err)
	}

	ruleBad := `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: X}
spec:
  hosts:
  - {name: a, address: a.example, zone: z, roles: [etcd, db]}
  - {name: a, address: 10.0.0.1, zone: z, roles: [etcd]}
  etcd: {dataDir: data, clientPort: 2381}
`
	_, _, err = Decode([]byte(ruleBad), "c.yaml", "")
	var ve *v1alpha1.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %v", err)
	}
	var fields []string
	for _, fe := range ve.Errors {
		fields = append(fields, fe.Field)
	}
	// No spec.ssh.identityFile error: agent "auto" (the default) may authenticate.
	wantFields := []string{"metadata.name", "spec.hosts[0].address", "spec.hosts[0].roles[1]",
		"spec.hosts[1].name", "spec.etcd.version", "spec.etcd.binaries.etcd", "spec.etcd.dataDir", "spec.etcd.clientPort", "spec.hosts"}
	if !slices.Equal(fields, wantFields) {
		t.Errorf("fields %v, want %v\n%v", fields, wantFields, err)
	}
	if ve.ExitCode() != 2 {
		t.Error("ExitCode != 2")
	}
	var fe *field.Error
	if !errors.As(err, &fe) || fe.Field != "metadata.name" {
		t.Errorf("errors.As(*field.Error) = %v", fe)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	var ec exitCoder
	if !errors.Is(err, os.ErrNotExist) || !errors.As(err, &ec) || ec.ExitCode() != 2 {
		t.Errorf("err = %v, want a not-exist error with exit code 2", err)
	}
}

// TestLoadMissingFileHint: a missing spec file points at hactl init (moved from v1alpha1's
// TestSyntaxErrorHints with Load).
func TestLoadMissingFileHint(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "hactl init -f") {
		t.Errorf("missing file: %v, want a hint at hactl init", err)
	}
}

// TestExampleSpecLoads: the example `hactl init` writes decodes and validates through the whole
// pipeline (lb's failover rule included) without warnings.
func TestExampleSpecLoads(t *testing.T) {
	c, warns, err := Decode(v1alpha1.ExampleSpec(), "example.yaml", t.TempDir())
	if err != nil || len(warns) > 0 {
		t.Fatalf("example spec: %v %v", err, warns)
	}
	if n := len(c.EtcdHosts()); n != 3 {
		t.Errorf("%d etcd members, want 3", n)
	}
}

// TestLoadRefusesHugeFiles: a spec larger than MaxSpecBytes (or an endless file) is refused without
// reading it all.
func TestLoadRefusesHugeFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(p, []byte(strings.Repeat("# padding\n", MaxSpecBytes/10+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, "/dev/zero"} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		_, _, err := Load(path)
		var ec exitCoder
		if err == nil || !errors.As(err, &ec) || ec.ExitCode() != 2 || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("%s: err = %v, want a size error with exit code 2", path, err)
		}
	}
}

// TestLocalFileErrorsCarryLines: ValidateLocalFiles errors wrapped by Cluster.ValidationError name
// the line of the field, like Load's own errors.
func TestLocalFileErrorsCarryLines(t *testing.T) {
	dir := t.TempDir()
	doc := `apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: x}
spec:
  ssh:
    identityFile: missing-key
    knownHostsFile: known_hosts
  hosts:
  - {name: a, address: 10.0.0.1, zone: z, roles: [etcd]}
  etcd:
    version: v3.6.16
    binaries:
      etcd: missing-etcd
`
	c, _, err := Decode([]byte(doc), "c.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	err = c.ValidationError("c.yaml", ValidateLocalFiles(c))
	var ec exitCoder
	if err == nil || !errors.As(err, &ec) || ec.ExitCode() != 2 {
		t.Fatalf("err = %v, want a ValidationError", err)
	}
	for _, want := range []string{"c.yaml:13: spec.etcd.binaries.etcd:", "c.yaml:6: spec.ssh.identityFile:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if c.ValidationError("c.yaml", nil) != nil {
		t.Error("ValidationError(nil) != nil")
	}
}
