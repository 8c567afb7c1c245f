package join

import (
	"errors"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/specload"
)

func exampleWith(t *testing.T, extra string) *v1alpha1.Cluster {
	t.Helper()
	data := strings.Replace(string(v1alpha1.ExampleSpec()), "  - name: cp-a\n", extra+"  - name: cp-a\n", 1)
	c, _, err := specload.Decode([]byte(data), "cluster.yaml", t.TempDir())
	if err != nil {
		t.Fatalf("decoding the example: %v", err)
	}
	return c
}

func TestSpec(t *testing.T) {
	spare := "  - {name: cp-d, address: 10.0.1.14, zone: az-c, roles: [control-plane]}\n  - {name: cp-e, address: 10.0.1.31, zone: az-a, roles: [control-plane]}\n"
	c := exampleWith(t, spare)
	after, err := Spec(c, "cp-c", "cp-d")
	if err != nil {
		t.Fatal(err)
	}
	var etcdHosts []string
	for _, h := range after.EtcdHosts() {
		etcdHosts = append(etcdHosts, h.Name)
	}
	if strings.Join(etcdHosts, ",") != "cp-d,cp-a,cp-b" {
		t.Errorf("etcd hosts after %v, want cp-d,cp-a,cp-b", etcdHosts)
	}
	if got := len(c.EtcdHosts()); got != 3 || !c.Spec.Hosts[0].HasRole(v1alpha1.RoleControlPlane) || c.Spec.Hosts[0].HasRole(v1alpha1.RoleEtcd) {
		t.Errorf("the input spec was changed: %d etcd hosts, %+v", got, c.Spec.Hosts[0])
	}
	// The spec edited to the end state first: cp-d has role etcd, cp-c (dead, say) no entry.
	edited := exampleWith(t, spare)
	var hosts []v1alpha1.Host
	for _, h := range edited.Spec.Hosts {
		switch h.Name {
		case "cp-c":
			continue
		case "cp-d":
			h.Roles = append(h.Roles, v1alpha1.RoleEtcd)
		}
		hosts = append(hosts, h)
	}
	edited.Spec.Hosts = hosts
	if got, err := Spec(edited, "cp-c", "cp-d"); err != nil || len(got.EtcdHosts()) != 3 {
		t.Errorf("Spec on the edited spec: %v, %v", got, err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"same host", "cp-c", "cp-c", "names the member being replaced"},
		{"old is no etcd host", "cp-e", "cp-d", "OLD must be a host of the spec with role etcd"},
		{"new not in the spec", "cp-c", "cp-x", "--with must name a host of the spec"},
		{"both have role etcd", "cp-c", "cp-b", "both OLD and NEW have role etcd"},
		// cp-a and cp-e are both in az-a: 2 of 3 members in one zone hold a quorum.
		{"result breaks the zone rule", "cp-c", "cp-e", "zone \"az-a\" holds 2 of the 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Spec(c, tc.old, tc.new)
			var se *SpecError
			if !errors.As(err, &se) || se.ExitCode() != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Spec(%s, %s) = %v, want a *SpecError (exit 2) containing %q", tc.old, tc.new, err, tc.want)
			}
		})
	}
}
