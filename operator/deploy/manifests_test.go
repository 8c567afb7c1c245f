package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/state"
)

func testCluster(t *testing.T, bootstrapped bool) *v1alpha1.Cluster {
	t.Helper()
	dir := t.TempDir()
	c := &v1alpha1.Cluster{Metadata: v1alpha1.ObjectMeta{Name: "prod"}}
	c.Spec.StateDir = dir
	c.Spec.Etcd.ClientPort, c.Spec.Etcd.PeerPort = 2379, 2380
	c.Spec.Etcd.ElectionTimeout.Duration = 1500 * time.Millisecond
	for i, z := range []string{"az-a", "az-b", "az-c"} {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "cp-" + string(rune('a'+i)), Address: "10.0.0." + string(rune('1'+i)), Zone: z, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	}
	if bootstrapped {
		if _, _, err := pki.LoadOrCreateCA(filepath.Join(dir, "pki")); err != nil {
			t.Fatal(err)
		}
		if err := state.Save(dir, &state.Cluster{Name: "prod", Token: "t", ClusterID: "c1a55e", Members: map[string]*state.Member{}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func kinds(p *Plan) []string {
	var out []string
	for _, u := range p.Objects {
		out = append(out, u.GetKind())
	}
	return out
}

func find(p *Plan, kind string) *unstructured.Unstructured {
	for _, u := range p.Objects {
		if u.GetKind() == kind {
			return u
		}
	}
	return nil
}

func TestBuild(t *testing.T) {
	c := testCluster(t, true)
	p, err := Build(Options{Cluster: c, Image: "ghcr.io/hactl/hactl-operator:dev"})
	if err != nil {
		t.Fatal(err)
	}
	want := "CustomResourceDefinition CustomResourceDefinition Namespace ServiceAccount Role RoleBinding Secret EtcdCluster Deployment PodDisruptionBudget"
	if got := strings.Join(kinds(p), " "); got != want {
		t.Errorf("kinds in order:\n%s\nwant\n%s", got, want)
	}
	ec := find(p, "EtcdCluster")
	id, _, _ := unstructured.NestedString(ec.Object, "spec", "clusterID")
	members, _, _ := unstructured.NestedSlice(ec.Object, "spec", "members")
	et, _, _ := unstructured.NestedString(ec.Object, "spec", "electionTimeout")
	if id != "c1a55e" || len(members) != 3 || et != "1.5s" || ec.GetNamespace() != DefaultNamespace || ec.GetName() != "prod" {
		t.Errorf("EtcdCluster %v", ec.Object)
	}
	if m := members[0].(map[string]any); m["name"] != "cp-a" || m["clientURL"] != "https://10.0.0.1:2379" {
		t.Errorf("member 0: %v", m)
	}
	// The operator's own client certificate was issued in the state dir and is in the Secret.
	if _, err := os.Stat(pki.CertPath(filepath.Join(c.Spec.StateDir, "pki"), ClientCertBase)); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	data, _, _ := unstructured.NestedStringMap(find(p, "Secret").Object, "data")
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if data[k] == "" {
			t.Errorf("Secret lacks %s", k)
		}
	}
	// The CA key never goes into the cluster.
	caKey, _ := os.ReadFile(pki.KeyPath(filepath.Join(c.Spec.StateDir, "pki"), pki.CABase))
	out, err := p.Print()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range data {
		if strings.Contains(string(out), v) {
			t.Error("Print shows Secret data")
		}
	}
	if !strings.Contains(string(out), "<redacted:") || strings.Contains(string(out), string(caKey)) {
		t.Error("Print does not redact, or holds the CA key")
	}
	// Least privilege: Secrets by name and get only; nothing cluster-wide.
	for _, r := range Rules() {
		for _, res := range r.Resources {
			if res == "secrets" && (len(r.ResourceNames) != 1 || strings.Join(r.Verbs, ",") != "get") {
				t.Errorf("secret rule %+v", r)
			}
		}
	}
	dep := find(p, "Deployment")
	replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
	anti, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
	nonRoot, _, _ := unstructured.NestedBool(dep.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot")
	if replicas != 2 || len(anti) != 1 || !nonRoot {
		t.Errorf("deployment: replicas %d, required anti-affinity %d, runAsNonRoot %v", replicas, len(anti), nonRoot)
	}
	if p1, _ := Build(Options{Cluster: c, Image: "x", Replicas: 1}); find(p1, "PodDisruptionBudget") != nil {
		t.Error("a PodDisruptionBudget for one replica would block every drain")
	}
}

func TestBuildDryRunWritesNothing(t *testing.T) {
	c := testCluster(t, true)
	if _, err := Build(Options{Cluster: c, Image: "x", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pki.CertPath(filepath.Join(c.Spec.StateDir, "pki"), ClientCertBase)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run issued the client certificate (%v)", err)
	}
}

func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     func(*Options)
		field string
	}{
		{"no image", func(o *Options) { o.Image = "" }, "--image"},
		{"namespace", func(o *Options) { o.Namespace = "Hactl_System" }, "--namespace"},
		{"replicas", func(o *Options) { o.Replicas = 9 }, "--replicas"},
		{"not bootstrapped", func(o *Options) { o.Cluster = testCluster(t, false) }, "spec.stateDir"},
	} {
		o := Options{Cluster: testCluster(t, true), Image: "x"}
		tc.o(&o)
		_, err := Build(o)
		var ue *UsageError
		if !errors.As(err, &ue) || ue.Field != tc.field || ue.ExitCode() != 2 {
			t.Errorf("%s: %v, want a usage error naming %s", tc.name, err, tc.field)
		}
	}
}
