package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestCommittedSchemaIsCurrent: the embedded cluster.schema.json is what the types and their doc
// comments generate now (`go run ./hack/schemagen` after changing them).
func TestCommittedSchemaIsCurrent(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	got, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, v1alpha1.JSONSchema) {
		t.Fatal("api/v1alpha1/cluster.schema.json is stale: run `go run ./hack/schemagen` and commit the result")
	}
}

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(v1alpha1.JSONSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// instance reads a YAML spec as the JSON value the schema sees, the way hactl and editors read it:
// YAML 1.2 ("yes" is a string).
func instance(t *testing.T, path string) any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var y any
	if err := yaml.Unmarshal(raw, &y); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	j, err := json.Marshal(y)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestValidSpecsMatchTheSchema runs the schema over every valid spec the repository's tests load
// (specload's valid-*.yaml, kubeadm's testdata, the example `hactl init` writes).
func TestValidSpecsMatchTheSchema(t *testing.T) {
	s := compile(t)
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(filepath.Join(root, "specload", "testdata"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "valid-") && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := filepath.Glob(filepath.Join(root, "kubeadm", "testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, kube...)
	files = append(files, filepath.Join(root, "api", "v1alpha1", "example.yaml"))
	if len(files) < 15 {
		t.Fatalf("found %d specs, want the repository's valid specs", len(files))
	}
	for _, f := range files {
		if err := s.Validate(instance(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestSchemaRefusesWrongShapes: unknown fields, wrong types and values outside a fixed set, which
// decoding or validation refuses, are refused by the schema too (an editor flags them before
// hactl runs).
func TestSchemaRefusesWrongShapes(t *testing.T) {
	s := compile(t)
	dir := filepath.Join("..", "..", "specload", "testdata")
	for _, name := range []string{
		"invalid-unknown-top-level-field.yaml", "invalid-unknown-etcd-field.yaml", "invalid-unknown-nested-field.yaml",
		"invalid-unknown-role.yaml", "invalid-wrong-type-bool.yaml", "invalid-wrong-type-duration.yaml",
		"invalid-wrong-type-int.yaml", "invalid-wrong-type-list.yaml", "invalid-lb-wrong-type-priorities.yaml",
		"invalid-compaction-mode.yaml", "invalid-lb-bad-mode.yaml", "invalid-lb-bad-topology.yaml", "invalid-bad-agent.yaml", // enums
		filepath.Join("backup", "invalid-unknown-field.yaml"),
	} {
		if err := s.Validate(instance(t, filepath.Join(dir, name))); err == nil {
			t.Errorf("%s: the schema accepts it", name)
		}
	}
}

// TestSchemaDescribesFields: descriptions come from the types' doc comments, and Cluster's
// apiVersion and kind are constants.
func TestSchemaDescribesFields(t *testing.T) {
	var doc struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Description string `json:"description"`
				Const       string `json:"const"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(v1alpha1.JSONSchema, &doc); err != nil {
		t.Fatal(err)
	}
	if d := doc.Defs["Etcd"].Properties["dataDir"].Description; !strings.Contains(d, "data directory") {
		t.Errorf("Etcd.dataDir description %q", d)
	}
	if c := doc.Defs["Cluster"].Properties["apiVersion"].Const; c != v1alpha1.APIVersion {
		t.Errorf("apiVersion const %q", c)
	}
}
