package v1alpha1

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestSetDefaultsLoadBalancer(t *testing.T) {
	c := &Cluster{Spec: ClusterSpec{LoadBalancer: &LoadBalancer{
		VIP:         "FD00:DB8::0100/64",
		Auth:        &VRRPAuth{File: "~/vrrp"},
		HealthCheck: LBHealthCheck{CAFile: "pki/ca.crt", Fall: 5},
	}}}
	SetDefaults(c, Dirs{Base: "/specs", Home: "/home/u"})
	want := LoadBalancer{VIP: "fd00:db8::100/64", VirtualRouterID: 51, Mode: "unicast", AdvertInterval: Duration{500 * time.Millisecond}, // IPv6: VRRPv3, auth or not
		Auth: &VRRPAuth{File: "/home/u/vrrp"}, Topology: "dedicated", FrontendPort: 6443, APIServerPort: 6443, CheckWeight: new(int), CheckFall: 1,
		HealthCheck: LBHealthCheck{Interval: Duration{2 * time.Second}, Fall: 5, Rise: 2, CAFile: "/specs/pki/ca.crt"}}
	if got := *c.Spec.LoadBalancer; !reflect.DeepEqual(got, want) {
		t.Errorf("defaulted:\n got %+v %+v\nwant %+v %+v", got, *got.Auth, want, *want.Auth)
	}
	before := fmt.Sprintf("%+v %+v", *c.Spec.LoadBalancer, *c.Spec.LoadBalancer.Auth)
	SetDefaults(c, Dirs{Base: "/elsewhere", Home: "/home/u"})
	if after := fmt.Sprintf("%+v %+v", *c.Spec.LoadBalancer, *c.Spec.LoadBalancer.Auth); after != before {
		t.Errorf("second SetDefaults changed the load balancer:\n%s\n%s", before, after)
	}
}

func TestCanonicalPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"172.28.0.100/24":         "172.28.0.100/24",
		"FD00:DB8::0100/64":       "fd00:db8::100/64",
		"::ffff:172.28.0.100/120": "172.28.0.100/24",
		"::ffff:172.28.0.100/64":  "::ffff:172.28.0.100/64", // no IPv4 prefix: left for Validate
		"172.28.0.100":            "172.28.0.100",
		"vip.example.com":         "vip.example.com",
		"":                        "",
	} {
		if got := CanonicalPrefix(in); got != want {
			t.Errorf("CanonicalPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDefaultAdvertInterval: 500ms (VRRPv3) unless auth is set on an IPv4 VIP (VRRPv2: 1s); an
// interval the spec gives is kept.
func TestDefaultAdvertInterval(t *testing.T) {
	for _, tc := range []struct {
		vip     string
		auth    bool
		given   time.Duration
		want    time.Duration
		version int
	}{
		{"172.28.0.100/24", false, 0, 500 * time.Millisecond, 3},
		{"172.28.0.100/24", true, 0, time.Second, 2},
		{"fd00:db8::100/64", true, 0, 500 * time.Millisecond, 3},
		{"172.28.0.100/24", false, 2 * time.Second, 2 * time.Second, 2},
		{"172.28.0.100/24", false, 1500 * time.Millisecond, 1500 * time.Millisecond, 3},
	} {
		lb := &LoadBalancer{VIP: tc.vip, AdvertInterval: Duration{tc.given}}
		if tc.auth {
			lb.Auth = &VRRPAuth{Env: "HACTL_VRRP_PASSWORD"}
		}
		c := &Cluster{Spec: ClusterSpec{LoadBalancer: lb}}
		SetDefaults(c, Dirs{Base: "/specs", Home: "/home/u"})
		if got := lb.AdvertInterval.Duration; got != tc.want || VRRPVersion(lb) != tc.version {
			t.Errorf("%s auth %v given %v: advertInterval %v VRRPv%d, want %v VRRPv%d", tc.vip, tc.auth, tc.given, got, VRRPVersion(lb), tc.want, tc.version)
		}
	}
}
