package explain

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

func doc(t *testing.T) *Doc {
	t.Helper()
	d, err := Parse(v1alpha1.JSONSchema)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func names(fs []Field) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func TestExplain(t *testing.T) {
	d := doc(t)
	tests := []struct {
		path, typ, desc string
		field           string // one of its fields, "" for none
	}{
		{"", "<Cluster>", "whole spec document", "spec"},
		{"spec.etcd", "<Etcd>", "", "spec.etcd.version"},
		{"cluster.spec.etcd.", "<Etcd>", "", "spec.etcd.dataDir"},
		{"spec.etcd.dataDir", "<string>", "absolute data directory", ""},
		{"spec.hosts", "<[]Host>", "", "spec.hosts.zone"}, // a list explains its elements' fields
		{"spec.hosts[].roles", "<[]string>", "", ""},
		{"spec.loadBalancer.advertInterval", "<string>", "", ""},
		{"spec.loadBalancer.priorities", "<map[string]integer>", "", ""},
	}
	for _, tt := range tests {
		f, err := d.Explain(tt.path, 1)
		if err != nil {
			t.Errorf("%q: %v", tt.path, err)
			continue
		}
		if f.Type != tt.typ || !strings.Contains(f.Description, tt.desc) {
			t.Errorf("%q: type %s, description %q", tt.path, f.Type, f.Description)
		}
		if tt.field != "" && !slices.Contains(names(f.Fields), tt.field) {
			t.Errorf("%q: fields %v lack %s", tt.path, names(f.Fields), tt.field)
		}
		if tt.field == "" && len(f.Fields) > 0 {
			t.Errorf("%q: a scalar with fields %v", tt.path, names(f.Fields))
		}
	}
	f, err := d.Explain("spec.hosts.roles", 0)
	if err != nil || !slices.Contains(f.Values, "control-plane") || f.Type != "<[]string>" {
		t.Errorf("roles: %+v %v", f, err)
	}
	if f, _ := d.Explain("apiVersion", 0); !slices.Equal(f.Values, []string{v1alpha1.APIVersion}) {
		t.Errorf("apiVersion values %v", f.Values)
	}
}

func TestRecursive(t *testing.T) {
	f, err := doc(t).Explain("spec.backup", -1)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	var walk func([]Field)
	walk = func(fs []Field) {
		for _, c := range fs {
			all = append(all, c.Path)
			walk(c.Fields)
		}
	}
	walk(f.Fields)
	if !slices.Contains(all, "spec.backup.objectStore.bucket") {
		t.Fatalf("recursive fields %v lack spec.backup.objectStore.bucket", all)
	}
}

func TestUnknownFieldSuggests(t *testing.T) {
	d := doc(t)
	tests := []struct{ path, parent, field, want string }{
		{"spec.etcd.versoin", "spec.etcd", "versoin", "spec.etcd.version"},
		{"spec.etc", "spec", "etc", "spec.etcd"},
		{"spec.loadbalancer", "spec", "loadbalancer", "spec.loadBalancer"},
		{"spec.hosts.zonee", "spec.hosts", "zonee", "spec.hosts.zone"},
		{"spec.nothinglikeit", "spec", "nothinglikeit", ""},
		{"spec.etcd.dataDir.more", "spec.etcd.dataDir", "more", ""},
	}
	for _, tt := range tests {
		_, err := d.Explain(tt.path, 1)
		var ue *UnknownFieldError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want *UnknownFieldError", tt.path, err)
			continue
		}
		if ue.Parent != tt.parent || ue.Field != tt.field {
			t.Errorf("%q: parent %q field %q", tt.path, ue.Parent, ue.Field)
		}
		if tt.want != "" && !strings.Contains(err.Error(), "did you mean "+tt.want) {
			t.Errorf("%q: %v, want a suggestion of %s", tt.path, err, tt.want)
		}
		if tt.want == "" && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: %v suggests something", tt.path, err)
		}
	}
}

func TestPrint(t *testing.T) {
	f, err := doc(t).Explain("spec.etcd", 1)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Print(&b, "Cluster", v1alpha1.APIVersion, f)
	out := b.String()
	for _, want := range []string{"KIND:     Cluster", "FIELD:    etcd <Etcd>", "DESCRIPTION:", "FIELDS:", "  dataDir\t<string>", "absolute data directory"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestMapsAndBadPaths: a map's values explain like a list's elements (a segment naming a field of
// the values steps in, any other is a key); malformed paths and roots glued to a field are refused.
func TestMapsAndBadPaths(t *testing.T) {
	d := doc(t)
	f, err := d.Explain("spec.scheduler.plugins", 1)
	if err != nil || !slices.Contains(names(f.Fields), "spec.scheduler.plugins.enabled") {
		t.Errorf("plugins: %v fields %v", err, names(f.Fields))
	}
	for _, p := range []string{"spec.scheduler.plugins.score.enabled", "spec.scheduler.plugins.enabled"} {
		if f, err := d.Explain(p, 0); err != nil || !strings.HasPrefix(f.Type, "<[]") {
			t.Errorf("%s: %+v %v", p, f, err)
		}
	}
	if f, err := d.Explain("spec.loadBalancer.priorities.lb-a", 0); err != nil || f.Type != "<integer>" {
		t.Errorf("priorities.lb-a: %+v %v", f, err)
	}
	for _, p := range []string{"spec..etcd", "spec.hosts[abc]", "spec.etcd.[0]"} {
		var pe *PathError
		if _, err := d.Explain(p, 1); !errors.As(err, &pe) {
			t.Errorf("%q: %v, want a *PathError", p, err)
		}
	}
	var ue *UnknownFieldError
	if _, err := d.Explain("clusterspec", 1); !errors.As(err, &ue) {
		t.Errorf("clusterspec: %v, want an unknown field", err)
	}
	if _, err := d.Explain("spec.etcd.dataDir.x", 1); err == nil || !strings.Contains(err.Error(), "a string has no fields") {
		t.Errorf("into a scalar: %v", err)
	}
}
