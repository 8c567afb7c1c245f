package reset

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

func cluster() *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{}
	c.Spec.Kubernetes = &v1alpha1.Kubernetes{}
	c.Spec.Etcd.DataDir = "/var/lib/etcd"
	for _, h := range []struct {
		name  string
		roles []v1alpha1.Role
	}{
		{"cp-a", []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{"cp-b", []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{"etcd-d", []v1alpha1.Role{v1alpha1.RoleEtcd}},
		{"w-a", []v1alpha1.Role{v1alpha1.RoleWorker}},
	} {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: h.name, Roles: h.roles})
	}
	return c
}

// TestPlanRemovesMemberFirst: a node with an etcd member is planned with the member's removal as its
// first step; a worker has no such step.
func TestPlanRemovesMemberFirst(t *testing.T) {
	p, err := NewPlan(Options{Cluster: cluster(), Hosts: []string{"cp-b", "w-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hosts) != 2 || p.Via != "cp-a" {
		t.Fatalf("plan %+v", p)
	}
	cp, w := p.Hosts[0], p.Hosts[1]
	if !cp.Member || !strings.Contains(cp.Steps[0], "remove its etcd member") || !strings.Contains(cp.Steps[0], "/var/lib/etcd aside") {
		t.Errorf("cp-b: %+v", cp)
	}
	if w.Member || strings.Contains(strings.Join(w.Steps, "\n"), "etcd member") {
		t.Errorf("w-a: %+v", w)
	}
	// What only the removed parts would clear: the member's backup timer, kube-proxy's chains.
	if !strings.Contains(cp.Steps[1], "backup schedule") || strings.Contains(strings.Join(w.Steps, "\n"), "backup schedule") {
		t.Errorf("the backup schedule goes with the member only: cp-b %q, w-a %q", cp.Steps, w.Steps)
	}
	for _, h := range p.Hosts {
		if !strings.Contains(strings.Join(h.Steps, "\n"), "iptables chains (KUBE-*") {
			t.Errorf("%s: no step removes the KUBE-* chains: %q", h.Name, h.Steps)
		}
	}
	if !strings.Contains(strings.Join(cp.Steps, "\n"), "/etc/kubernetes/hactl-scheduler") || strings.Contains(strings.Join(w.Steps, "\n"), "hactl-scheduler") {
		t.Errorf("hactl-scheduler's static pod files go from a control plane only: cp-b %q, w-a %q", cp.Steps, w.Steps)
	}
}

func TestPlanRefuses(t *testing.T) {
	for hosts, want := range map[string]string{
		"etcd-d":    "hactl etcd member remove etcd-d",
		"nosuch":    "nosuch is not a host of the spec",
		"cp-a,cp-b": "every control-plane host",
		"":          "name the hosts",
	} {
		_, err := NewPlan(Options{Cluster: cluster(), Hosts: strings.Split(hosts, ",")})
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), want) {
			t.Errorf("--hosts %q: %v, want an InputError containing %q", hosts, err, want)
		}
	}
}

// TestResetDryRun: a dry run shows the plan and stops there, without dialling the bastion even
// when a planned host runs a member; a plan that is refused is never shown.
func TestResetDryRun(t *testing.T) {
	var shown []Plan
	show := func(p Plan) error { shown = append(shown, p); return nil }
	if err := Reset(context.Background(), Options{Cluster: cluster(), Hosts: []string{"cp-b", "w-a"}}, true, show); err != nil {
		t.Fatal(err)
	}
	if len(shown) != 1 || len(shown[0].Hosts) != 2 {
		t.Fatalf("shown %+v", shown)
	}
	var ie *InputError
	if err := Reset(context.Background(), Options{Cluster: cluster(), Hosts: []string{"nosuch"}}, true, show); !errors.As(err, &ie) || len(shown) != 1 {
		t.Fatalf("refused plan: %v, shown %d", err, len(shown))
	}
}
