package specload

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/limits"
	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/testcert"
	"github.com/hactl/hactl/lb"
)

// lbCluster returns a defaulted, valid spec shaped like the lab: 3 control-plane + etcd hosts and 2
// dedicated LB hosts on 172.28.0.0/24, VIP 172.28.0.100/24.
func lbCluster(t *testing.T) *v1alpha1.Cluster {
	c := validCluster(t, "/specs")
	for i := range c.Spec.Hosts {
		c.Spec.Hosts[i].Address = fmt.Sprintf("172.28.0.%d", 11+i)
		c.Spec.Hosts[i].Roles = []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}
	}
	c.Spec.Hosts = append(c.Spec.Hosts,
		v1alpha1.Host{Name: "lb-a", Address: "172.28.0.21", Port: 22, Zone: "z1", Roles: []v1alpha1.Role{v1alpha1.RoleLB}},
		v1alpha1.Host{Name: "lb-b", Address: "172.28.0.22", Port: 22, Zone: "z2", Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
	c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "172.28.0.100/24"}
	setDefaults(c, "/specs")
	return c
}

func intp(i int) *int { return &i }

// toIPv6 moves every host and the VIP to fd00:db8:28::/64.
func toIPv6(c *v1alpha1.Cluster) {
	for i := range c.Spec.Hosts {
		c.Spec.Hosts[i].Address = strings.Replace(c.Spec.Hosts[i].Address, "172.28.0.", "fd00:db8:28::", 1)
	}
	c.Spec.LoadBalancer.VIP = "fd00:db8:28::100/64"
}

// TestValidateLoadBalancer covers the spec.loadBalancer rules the testdata files don't.
func TestValidateLoadBalancer(t *testing.T) {
	lb := func(f func(lb *v1alpha1.LoadBalancer)) func(c *v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) { f(c.Spec.LoadBalancer) }
	}
	tests := []struct {
		name   string
		mutate func(c *v1alpha1.Cluster)
		want   []string // error fields, in order
		detail string   // substring of the first error
		warns  []string
	}{
		{"lab shape", func(c *v1alpha1.Cluster) {}, nil, "", nil},
		{"no load balancer", func(c *v1alpha1.Cluster) { c.Spec.LoadBalancer = nil }, nil, "", nil},
		{"colocated on another port", lb(func(lb *v1alpha1.LoadBalancer) { lb.Topology, lb.FrontendPort = v1alpha1.TopologyColocated, 8443 }),
			nil, "", []string{"spec.hosts[3].roles", "spec.hosts[4].roles"}},
		{"colocated apiserver on the local port", lb(func(lb *v1alpha1.LoadBalancer) {
			lb.Topology, lb.FrontendPort, lb.APIServerPort = v1alpha1.TopologyColocated, 8443, limits.LBLocalPort
		}), []string{"spec.loadBalancer.apiServerPort"}, "HAProxy's local endpoint", []string{"spec.hosts[3].roles", "spec.hosts[4].roles"}},
		{"multicast", lb(func(lb *v1alpha1.LoadBalancer) { lb.Mode = v1alpha1.LBModeMulticast }), nil, "", nil},
		{"priorities reversed", lb(func(lb *v1alpha1.LoadBalancer) { lb.Priorities = map[string]int{"lb-a": 100, "lb-b": 200} }), nil, "", nil},
		{"positive weight", lb(func(lb *v1alpha1.LoadBalancer) { lb.CheckWeight = intp(20) }), nil, "", nil},
		{"weight 0", lb(func(lb *v1alpha1.LoadBalancer) { lb.CheckWeight = intp(0) }), nil, "", nil},
		{"nopreempt, weight 0", lb(func(lb *v1alpha1.LoadBalancer) { lb.Nopreempt, lb.CheckWeight = true, intp(0) }), nil, "", nil},
		{"nopreempt, weight -20", lb(func(lb *v1alpha1.LoadBalancer) { lb.Nopreempt, lb.CheckWeight = true, intp(-20) }),
			[]string{"spec.loadBalancer.nopreempt"}, "nopreempt with checkWeight -20 would keep the VIP on a host whose HAProxy failed", nil},
		{"weight reaches only the next host", func(c *v1alpha1.Cluster) {
			c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "lb-c", Address: "172.28.0.23", Port: 22, Zone: "z3", Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
			c.Spec.LoadBalancer.CheckWeight = intp(-15)
		}, []string{"spec.loadBalancer.checkWeight"}, "when the check on lb-a fails it still advertises 135, above lb-c's 130", nil},
		{"16 LB hosts", func(c *v1alpha1.Cluster) {
			for i := range 14 {
				c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: fmt.Sprintf("lb-%d", i), Address: fmt.Sprintf("172.28.0.%d", 30+i), Port: 22, Zone: "z3", Roles: []v1alpha1.Role{v1alpha1.RoleLB}})
			}
		}, nil, "", nil},
		{"tie lost on the address", lb(func(lb *v1alpha1.LoadBalancer) {
			lb.Priorities = map[string]int{"lb-a": 140, "lb-b": 150}
			lb.CheckWeight = intp(-10) // lb-b drops to 140 = lb-a's, and 172.28.0.22 > .21
		}), []string{"spec.loadBalancer.checkWeight"}, "wins the tie with the higher address (172.28.0.22 > 172.28.0.21)", nil},
		{"VIP /32", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "172.28.0.100/32" }), []string{"spec.loadBalancer.vip"}, "outside the network of LB host(s) lb-a (172.28.0.21), lb-b (172.28.0.22)", nil},
		{"VIP outside one host's network", func(c *v1alpha1.Cluster) { c.Spec.Hosts[4].Address = "172.28.1.22" },
			[]string{"spec.loadBalancer.vip"}, "outside the network of LB host(s) lb-b (172.28.1.22)", nil},
		{"VIP equals a control-plane host", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "172.28.0.12/24" }), []string{"spec.loadBalancer.vip"}, "is the address of host b (spec.hosts[1])", nil},
		{"VIP broadcast", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "172.28.0.255/24" }), []string{"spec.loadBalancer.vip"}, "broadcast address of 172.28.0.0/24", nil},
		{"VIP loopback", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "127.0.0.5/8" }), []string{"spec.loadBalancer.vip"}, "unicast address", nil},
		{"VIP zone", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "fe80::1%eth0/64" }), []string{"spec.loadBalancer.vip"}, "zone index can't be part of the VIP", nil},
		{"VIP zone, no prefix", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "fe80::1%eth0" }), []string{"spec.loadBalancer.vip"}, "zone index can't be part of the VIP", nil},
		{"VIP missing", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "" }), []string{"spec.loadBalancer.vip"}, "Required value", nil},
		{"VIP of the other family", lb(func(lb *v1alpha1.LoadBalancer) { lb.VIP = "fd00:db8:28::100/64" }), []string{"spec.loadBalancer.vip"}, "outside the network", nil},
		{"IPv6", toIPv6, nil, "", nil},
		{"IPv6 advertInterval 40s", func(c *v1alpha1.Cluster) { toIPv6(c); c.Spec.LoadBalancer.AdvertInterval.Duration = 40 * time.Second }, nil, "", nil},
		{"IPv6 advertInterval 41s", func(c *v1alpha1.Cluster) { toIPv6(c); c.Spec.LoadBalancer.AdvertInterval.Duration = 41 * time.Second },
			[]string{"spec.loadBalancer.advertInterval"}, "at most 40.95s for VRRPv3 (IPv6)", nil},
		{"IPv6 advertInterval 40.95s", func(c *v1alpha1.Cluster) {
			toIPv6(c)
			c.Spec.LoadBalancer.AdvertInterval.Duration = 40950 * time.Millisecond
		}, nil, "", nil},
		{"IPv6 advertInterval 250ms", func(c *v1alpha1.Cluster) {
			toIPv6(c)
			c.Spec.LoadBalancer.AdvertInterval.Duration = 250 * time.Millisecond
		}, nil, "", nil},
		{"IPv4 advertInterval 255s", lb(func(lb *v1alpha1.LoadBalancer) { lb.AdvertInterval.Duration = 255 * time.Second }), nil, "", nil},
		{"IPv4 advertInterval 500ms (VRRPv3)", lb(func(lb *v1alpha1.LoadBalancer) { lb.AdvertInterval.Duration = 500 * time.Millisecond }), nil, "", nil},
		{"IPv4 advertInterval 1.5s (VRRPv3)", lb(func(lb *v1alpha1.LoadBalancer) { lb.AdvertInterval.Duration = 1500 * time.Millisecond }), nil, "", nil},
		{"IPv4 advertInterval 50ms", lb(func(lb *v1alpha1.LoadBalancer) { lb.AdvertInterval.Duration = 50 * time.Millisecond }),
			[]string{"spec.loadBalancer.advertInterval"}, "hundredths of a second from 100ms (VRRPv3)", nil},
		{"IPv4 advertInterval 1505ms", lb(func(lb *v1alpha1.LoadBalancer) { lb.AdvertInterval.Duration = 1505 * time.Millisecond }),
			[]string{"spec.loadBalancer.advertInterval"}, "hundredths of a second", nil},
		{"IPv4 advertInterval 41s (VRRPv3 bound does not apply to whole seconds)", lb(func(lb *v1alpha1.LoadBalancer) { lb.AdvertInterval.Duration = 41 * time.Second }), nil, "", nil},
		{"IPv4 advertInterval 41.5s", lb(func(lb *v1alpha1.LoadBalancer) { lb.AdvertInterval.Duration = 41500 * time.Millisecond }),
			[]string{"spec.loadBalancer.advertInterval"}, "at most 40.95s for VRRPv3 (an interval that is not whole seconds)", nil},
		{"IPv4 advertInterval 500ms with auth", lb(func(lb *v1alpha1.LoadBalancer) {
			lb.AdvertInterval.Duration = 500 * time.Millisecond
			lb.Auth = &v1alpha1.VRRPAuth{Env: "HACTL_VRRP_PASSWORD"}
		}), []string{"spec.loadBalancer.auth"}, "runs VRRPv3, and VRRPv3 has no authentication", nil},
		{"IPv6 with auth", func(c *v1alpha1.Cluster) {
			toIPv6(c)
			c.Spec.LoadBalancer.Auth = &v1alpha1.VRRPAuth{Env: "HACTL_VRRP_PASSWORD"}
		},
			[]string{"spec.loadBalancer.auth"}, "VRRPv3, which has no authentication", nil},
		// (auth set after defaulting: advertInterval as the defaults make it with auth, 1s)
		{"auth env as a reference", lb(func(lb *v1alpha1.LoadBalancer) {
			lb.Auth, lb.AdvertInterval.Duration = &v1alpha1.VRRPAuth{Env: "$HACTL_VRRP"}, v1alpha1.DefaultAdvertIntervalAuth
		}),
			[]string{"spec.loadBalancer.auth.env"}, "without $ or braces: HACTL_VRRP", nil},
		{"auth file pasted PEM", lb(func(lb *v1alpha1.LoadBalancer) {
			lb.Auth, lb.AdvertInterval.Duration = &v1alpha1.VRRPAuth{File: "-----BEGIN PRIVATE KEY-----\nabc"}, v1alpha1.DefaultAdvertIntervalAuth
		}),
			[]string{"spec.loadBalancer.auth.file"}, "(value not shown)", nil},
		{"caFile pasted PEM", lb(func(lb *v1alpha1.LoadBalancer) { lb.HealthCheck.CAFile = "-----BEGIN CERTIFICATE-----\nMIIB" }),
			[]string{"spec.loadBalancer.healthCheck.caFile"}, "not its contents", nil},
		{"check interval in microseconds", lb(func(lb *v1alpha1.LoadBalancer) { lb.HealthCheck.Interval.Duration = 1500 * time.Microsecond }),
			[]string{"spec.loadBalancer.healthCheck.interval"}, "whole number of milliseconds", nil},
		{"virtualRouterID 0 after defaulting", lb(func(lb *v1alpha1.LoadBalancer) { lb.VirtualRouterID = -1 }), []string{"spec.loadBalancer.virtualRouterID"}, "between 1 and 255", nil},
		{"LB host also control-plane on the same port", func(c *v1alpha1.Cluster) {
			c.Spec.Hosts[3].Roles = []v1alpha1.Role{v1alpha1.RoleLB, v1alpha1.RoleControlPlane}
		},
			[]string{"spec.loadBalancer.frontendPort"}, "host lb-a runs HAProxy and kube-apiserver (apiServerPort) on the same port 6443", nil},
		{"LB host also etcd on its client port", func(c *v1alpha1.Cluster) {
			c.Spec.Hosts[3].Roles = []v1alpha1.Role{v1alpha1.RoleLB, v1alpha1.RoleEtcd}
			c.Spec.Hosts[4].Roles = []v1alpha1.Role{v1alpha1.RoleLB, v1alpha1.RoleEtcd}
			c.Spec.LoadBalancer.FrontendPort = 2379
		}, []string{"spec.loadBalancer.frontendPort"}, "host lb-a runs HAProxy and etcd (spec.etcd.clientPort)", nil},
		{"bad frontend port", lb(func(lb *v1alpha1.LoadBalancer) { lb.FrontendPort = 70000 }), []string{"spec.loadBalancer.frontendPort"}, "between 1 and 65535", nil},
		{"priority for an unknown host and a missing one", lb(func(lb *v1alpha1.LoadBalancer) { lb.Priorities = map[string]int{"lb-a": 150, "lb-x": 140} }),
			[]string{"spec.loadBalancer.priorities[lb-x]", "spec.loadBalancer.priorities"}, `"lb-x" is not an LB host (LB hosts: lb-a, lb-b)`, nil},
		{"no hosts: no load balancer noise", func(c *v1alpha1.Cluster) { c.Spec.Hosts = nil }, []string{"spec.hosts"}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := lbCluster(t)
			tc.mutate(c)
			setDefaults(c, "/specs")
			errs, warns := Validate(c)
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
		})
	}
}

func writeSecret(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestValidateLocalFilesLoadBalancer: the CA bundle and the auth secret file are checked before any
// host is contacted; a secret longer than 8 characters is refused and never quoted.
func TestValidateLocalFilesLoadBalancer(t *testing.T) {
	dir := localFilesDir(t)
	writeKey(t, filepath.Join(dir, "id"), "")
	testcert.WriteCA(t, filepath.Join(dir, "ca.crt"))
	testcert.WriteLeaf(t, filepath.Join(dir, "serving.crt"))
	testcert.WriteCAWithKey(t, filepath.Join(dir, "ca-and-key.pem"))
	writeSecret(t, filepath.Join(dir, "not-pem"), "hello\n", 0o644)
	const long = "s3cr3tPassw0rd"
	writeSecret(t, filepath.Join(dir, "good"), "k8s-vip\n", 0o600)
	writeSecret(t, filepath.Join(dir, "crlf"), "k8s-vip\r\n", 0o600)
	writeSecret(t, filepath.Join(dir, "eight"), "12345678", 0o400)
	writeSecret(t, filepath.Join(dir, "long"), long+"\n", 0o600)
	writeSecret(t, filepath.Join(dir, "loose"), "k8s-vip\n", 0o644)
	writeSecret(t, filepath.Join(dir, "empty"), "", 0o600)
	writeSecret(t, filepath.Join(dir, "space"), "a b\n", 0o600)
	writeSecret(t, filepath.Join(dir, "two-lines"), "ab\n\n", 0o600)

	for _, tc := range []struct {
		name         string
		ca, secret   string // file names in dir ("" = not set)
		want, detail string // error field and message substring ("" = no error)
	}{
		{"CA and secret", "ca.crt", "good", "", ""},
		{"secret with CRLF", "", "crlf", "", ""},
		{"8 characters, mode 0400", "", "eight", "", ""},
		{"CA missing", "nope.crt", "", "spec.loadBalancer.healthCheck.caFile", "the CA file does not exist"},
		{"CA is a directory", "ssh", "", "spec.loadBalancer.healthCheck.caFile", "is not a regular file"},
		{"serving certificate", "serving.crt", "", "spec.loadBalancer.healthCheck.caFile", "holds no CA certificate"},
		{"CA with its key", "ca-and-key.pem", "", "spec.loadBalancer.healthCheck.caFile", "holds a private key"},
		{"not PEM", "not-pem", "", "spec.loadBalancer.healthCheck.caFile", "holds no PEM certificate"},
		{"secret longer than 8", "", "long", "spec.loadBalancer.auth.file", "is 14 characters long: the auth secret must be at most 8 characters (keepalived uses only the first 8"},
		{"secret file readable by others", "", "loose", "spec.loadBalancer.auth.file", "has mode 0644"},
		{"secret missing", "", "nope", "spec.loadBalancer.auth.file", "the auth secret file does not exist"},
		{"secret empty", "", "empty", "spec.loadBalancer.auth.file", "is empty"},
		{"secret with a space", "", "space", "spec.loadBalancer.auth.file", "contains a character other than letters"},
		{"secret with two newlines", "", "two-lines", "spec.loadBalancer.auth.file", "contains a character other than letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := lbCluster(t)
			setDefaults(c, dir)
			if tc.ca != "" {
				c.Spec.LoadBalancer.HealthCheck.CAFile = filepath.Join(dir, tc.ca)
			}
			if tc.secret != "" {
				c.Spec.LoadBalancer.Auth = &v1alpha1.VRRPAuth{File: filepath.Join(dir, tc.secret)}
			}
			c.Spec.SSH.IdentityFile = filepath.Join(dir, "id")
			c.Spec.SSH.KnownHostsFile = filepath.Join(dir, "ssh", "known_hosts")
			c.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{Etcd: filepath.Join(dir, "etcd")}
			errs := ValidateLocalFiles(c)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.want || !strings.Contains(errs[0].Error(), tc.detail) {
				t.Fatalf("errors %v, want one on %s saying %q", errs, tc.want, tc.detail)
			}
			if strings.Contains(errs[0].Error(), long) {
				t.Errorf("message quotes the secret: %v", errs[0])
			}
		})
	}
}

// TestValidateEnvironmentLoadBalancer: auth.env must name a set variable holding a valid secret;
// messages name the variable, never its value.
func TestValidateEnvironmentLoadBalancer(t *testing.T) {
	const long = "correcthorse"
	for _, tc := range []struct {
		name, value  string
		want, detail string
	}{
		{"set", "k8s-vip", "", ""},
		{"unset", "", "spec.loadBalancer.auth.env", "names the environment variable HACTL_VRRP_PASSWORD, which is not set (or is empty): export HACTL_VRRP_PASSWORD=... (the VRRP auth secret, at most 8 characters)"},
		{"too long", long, "spec.loadBalancer.auth.env", "the auth secret in HACTL_VRRP_PASSWORD is 12 characters long"},
		{"quote", `ab"c`, "spec.loadBalancer.auth.env", "contains a character other than letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := lbCluster(t)
			c.Spec.LoadBalancer.Auth = &v1alpha1.VRRPAuth{Env: "HACTL_VRRP_PASSWORD"}
			env := map[string]string{"HACTL_VRRP_PASSWORD": tc.value, "SSH_AUTH_SOCK": "/agent"}
			errs := ValidateEnvironment(c, func(k string) string { return env[k] })
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				s, err := ReadVRRPSecret(c, func(k string) string { return env[k] })
				if err != nil || s != tc.value {
					t.Errorf("ReadVRRPSecret = %q, %v; want the value", s, err)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.want || !strings.Contains(errs[0].Error(), tc.detail) {
				t.Fatalf("errors %v, want one on %s saying %q", errs, tc.want, tc.detail)
			}
			if strings.Contains(errs[0].Error(), long) {
				t.Errorf("message quotes the secret: %v", errs[0])
			}
			if _, err := ReadVRRPSecret(c, func(k string) string { return env[k] }); err == nil || strings.Contains(err.Error(), long) {
				t.Errorf("ReadVRRPSecret: %v, want an error that does not quote the secret", err)
			}
		})
	}
}

func TestReadVRRPSecret(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, filepath.Join(dir, "s"), "k8s-vip\n", 0o600)
	c := lbCluster(t)
	if s, err := ReadVRRPSecret(c, nil); s != "" || err != nil {
		t.Errorf("no auth: %q, %v", s, err)
	}
	c.Spec.LoadBalancer.Auth = &v1alpha1.VRRPAuth{File: filepath.Join(dir, "s")}
	if s, err := ReadVRRPSecret(c, nil); s != "k8s-vip" || err != nil {
		t.Errorf("file: %q, %v", s, err)
	}
	c.Spec.LoadBalancer.Auth = &v1alpha1.VRRPAuth{File: filepath.Join(dir, "nope")}
	if _, err := ReadVRRPSecret(c, nil); err == nil || !strings.Contains(err.Error(), "spec.loadBalancer.auth.file") {
		t.Errorf("missing file: %v", err)
	}
}

// TestReadAuthSecret: the secret auth.env names becomes the lb.AuthSecret RenderKeepalived takes; an
// unset variable is an error naming it, and no auth gives the zero secret (moved from lb).
func TestReadAuthSecret(t *testing.T) {
	const testSecret = "k8s-vip1"
	want, err := lb.NewAuthSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	c := lbCluster(t)
	c.Spec.LoadBalancer.Auth = &v1alpha1.VRRPAuth{Env: "HACTL_VRRP_PASSWORD"}
	got, err := ReadAuthSecret(c, func(k string) string { return map[string]string{"HACTL_VRRP_PASSWORD": testSecret}[k] })
	if err != nil || got != want {
		t.Errorf("ReadAuthSecret = %v, %v", got, err)
	}
	if _, err := ReadAuthSecret(c, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "HACTL_VRRP_PASSWORD, which is not set") {
		t.Errorf("ReadAuthSecret(unset): %v", err)
	}
	if got, err := ReadAuthSecret(lbCluster(t), nil); err != nil || !got.IsZero() {
		t.Errorf("ReadAuthSecret(no auth) = %v, %v", got, err)
	}
}

// TestLBLocalFileErrorsCarryLines: a too-long secret found by ValidateLocalFiles names the line of
// spec.loadBalancer.auth.file, like Load's own errors.
func TestLBLocalFileErrorsCarryLines(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, filepath.Join(dir, "vrrp-secret"), "012345678\n", 0o600)
	data, err := os.ReadFile("testdata/valid-lb-dedicated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data) + "    auth:\n      file: vrrp-secret\n"
	c, _, err := Decode([]byte(doc), "c.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	err = c.ValidationError("c.yaml", validateLBLocalFiles(c))
	want := "c.yaml:22: spec.loadBalancer.auth.file: Invalid value: \"" + filepath.Join(dir, "vrrp-secret") + "\": the auth secret in this file is 9 characters long"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant it to contain %s", err, want)
	}
}
