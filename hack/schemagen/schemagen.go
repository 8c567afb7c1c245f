package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/hactl/hactl/api/v1alpha1"
)

// SchemaID is the schema's $id.
const SchemaID = "https://hactl.io/schemas/v1alpha1/cluster.schema.json"

// durationPattern is what time.ParseDuration accepts, unsigned (spec durations are not negative).
const durationPattern = `^(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+$`

// Generate returns the schema, indented JSON with a trailing newline, for the Cluster document. It
// runs in the repository root: the doc comments come from ./api/v1alpha1 (invopop/jsonschema keys
// them by the module path joined with the walked directory, relative to the working directory).
// Errors are the source's parse errors.
func Generate() ([]byte, error) {
	r := &jsonschema.Reflector{
		// No field is required by the schema: defaulting fills most, and whether a field is needed
		// depends on others (validation says so, with the field path and the fix).
		RequiredFromJSONSchemaTags: true,
		Mapper:                     mapper,
	}
	if err := r.AddGoComments("github.com/hactl/hactl", filepath.Join("api", "v1alpha1")); err != nil {
		return nil, fmt.Errorf("read the API's doc comments: %w", err)
	}
	s := r.Reflect(&v1alpha1.Cluster{})
	s.ID = SchemaID
	s.Title = "hactl Cluster (" + v1alpha1.APIVersion + ")"
	if c, ok := s.Definitions["Cluster"]; ok {
		if p, ok := c.Properties.Get("apiVersion"); ok {
			p.Const = v1alpha1.APIVersion
		}
		if p, ok := c.Properties.Get("kind"); ok {
			p.Const = v1alpha1.Kind
		}
	}
	for _, e := range enums {
		if d, ok := s.Definitions[e.def]; ok {
			if p, ok := d.Properties.Get(e.field); ok {
				for _, v := range e.values {
					p.Enum = append(p.Enum, v)
				}
			}
		}
	}
	for _, d := range s.Definitions {
		nullableObjects(d)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// enums are the string fields with a fixed set of values (validation's rules; "" means the default
// there and is left out here, as the field is optional).
var enums = []struct {
	def, field string
	values     []string
}{
	{"AutoCompaction", "mode", []string{v1alpha1.CompactionPeriodic, v1alpha1.CompactionRevision}},
	{"SSH", "agent", []string{v1alpha1.AgentAuto, v1alpha1.AgentNever, v1alpha1.AgentRequired}},
	{"LoadBalancer", "mode", []string{v1alpha1.LBModeUnicast, v1alpha1.LBModeMulticast}},
	{"LoadBalancer", "topology", []string{v1alpha1.TopologyDedicated, v1alpha1.TopologyColocated}},
	{"Kubernetes", "cni", []string{v1alpha1.CNIBridge, v1alpha1.CNINone}},
}

// mapper gives the schema of the API's own scalar types: Duration is a Go duration string, Role one
// of the roles.
func mapper(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[v1alpha1.Duration]():
		return &jsonschema.Schema{
			Type:        "string",
			Pattern:     durationPattern,
			Description: `A Go duration ("500ms", "1m30s").`,
		}
	case reflect.TypeFor[v1alpha1.Role]():
		return &jsonschema.Schema{
			Type: "string",
			Enum: []any{string(v1alpha1.RoleEtcd), string(v1alpha1.RoleControlPlane), string(v1alpha1.RoleLB), string(v1alpha1.RoleWorker)},
		}
	}
	return nil
}

// nullableObjects lets each object, list and map property of d be null too: hactl's decoder takes
// null ("backup:" with its fields commented out, as `hactl init` writes) as absent.
func nullableObjects(d *jsonschema.Schema) {
	if d.Properties == nil {
		return
	}
	for p := d.Properties.Oldest(); p != nil; p = p.Next() {
		v := p.Value
		switch {
		case v.Ref != "":
			*v = jsonschema.Schema{Description: v.Description, AnyOf: []*jsonschema.Schema{{Ref: v.Ref}, {Type: "null"}}}
		case v.Type == "object" || v.Type == "array":
			alt := *v
			alt.Description = ""
			*v = jsonschema.Schema{Description: v.Description, AnyOf: []*jsonschema.Schema{&alt, {Type: "null"}}}
		}
	}
}
