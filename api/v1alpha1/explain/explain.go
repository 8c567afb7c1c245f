// Package explain answers `hactl explain spec.etcd`: the field at a dotted path of the Cluster
// document, its type, description and fields, read from the JSON Schema generated from the API
// types and their doc comments (v1alpha1.JSONSchema), the way kubectl explain reads the OpenAPI
// schema. A path that names no field is an *UnknownFieldError with the nearest field names.
package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Schema is the subset of a JSON Schema node explain reads.
type Schema struct {
	Ref         string             `json:"$ref,omitempty"`
	Type        string             `json:"type,omitempty"`
	Description string             `json:"description,omitempty"`
	Properties  orderedProperties  `json:"properties,omitempty"`
	Items       *Schema            `json:"items,omitempty"`
	AddlProps   json.RawMessage    `json:"additionalProperties,omitempty"`
	AnyOf       []*Schema          `json:"anyOf,omitempty"`
	Enum        []any              `json:"enum,omitempty"`
	Const       any                `json:"const,omitempty"`
	Pattern     string             `json:"pattern,omitempty"`
	Defs        map[string]*Schema `json:"$defs,omitempty"`
}

// property is one named field, in the schema's (the Go struct's) order.
type property struct {
	Name   string
	Schema *Schema
}

// orderedProperties keeps the properties in document order (a map would sort them).
type orderedProperties []property

// UnmarshalJSON reads a JSON object keeping its key order.
func (p *orderedProperties) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var s Schema
		if err := dec.Decode(&s); err != nil {
			return err
		}
		*p = append(*p, property{Name: tok.(string), Schema: &s})
	}
	_, err := dec.Token() // }
	return err
}

// Doc is a parsed schema document.
type Doc struct {
	root *Schema
}

// Parse reads a JSON Schema document (draft 2020-12, local $refs into $defs). Errors are JSON's.
func Parse(schema []byte) (*Doc, error) {
	var root Schema
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("parse the spec's JSON Schema: %w", err)
	}
	return &Doc{root: &root}, nil
}

// resolve follows $ref and the non-null branch of anyOf [X, null] and returns the node with the
// name of the definition it came from ("" for inline nodes).
func (d *Doc) resolve(s *Schema) (*Schema, string) {
	name := ""
	for range 8 { // refs in this schema are at most a few deep
		switch {
		case s.Ref != "":
			n := strings.TrimPrefix(s.Ref, "#/$defs/")
			def, ok := d.root.Defs[n]
			if !ok {
				return s, name
			}
			s, name = def, n
		case len(s.AnyOf) > 0:
			var next *Schema
			for _, a := range s.AnyOf {
				if a.Type != "null" {
					next = a
					break
				}
			}
			if next == nil {
				return s, name
			}
			s = next
		default:
			return s, name
		}
	}
	return s, name
}

// Field is what explain prints for one path.
type Field struct {
	// Path is the dotted path asked for, normalised ("spec.hosts.ssh"); "" for the document.
	Path string `json:"path"`
	// Type is the field's type as kubectl explain writes it: "<Etcd>", "<string>", "<[]Host>",
	// "<map[string]integer>".
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	// Values are the values an enum or constant allows; Pattern a string's pattern.
	Values  []string `json:"values,omitempty"`
	Pattern string   `json:"pattern,omitempty"`
	// Fields are the object's own fields (the elements' for a list of objects), in spec order.
	Fields []Field `json:"fields,omitempty"`
}

// UnknownFieldError is a path segment that names no field of its parent.
type UnknownFieldError struct {
	// Path is the path asked for; Parent the path of the object that has no field Field.
	Path, Parent, Field string
	// Type is the parent's type name; Known its fields; Suggestions the nearest of them.
	Type        string
	Known       []string
	Suggestions []string
}

// ExitCode returns 2 (invalid input, found locally), as hactl's exit codes say.
func (e *UnknownFieldError) ExitCode() int { return 2 }

func (e *UnknownFieldError) Error() string {
	where := e.Parent
	if where == "" {
		where = "the document"
	}
	msg := fmt.Sprintf("%s: %s (%s) has no field %q", e.Path, where, e.Type, e.Field)
	if len(e.Suggestions) > 0 {
		full := make([]string, len(e.Suggestions))
		for i, s := range e.Suggestions {
			full[i] = join(e.Parent, s)
		}
		msg += "; did you mean " + strings.Join(full, " or ") + "?"
	}
	if len(e.Known) == 0 {
		return msg + " (a " + e.Type + " has no fields)"
	}
	return msg + " (its fields: " + strings.Join(e.Known, ", ") + ")"
}

func join(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// Explain returns the field at path, a dotted path from the document root such as "spec.etcd" or
// "spec.hosts.ssh" (list elements are stepped into; "[]", "[*]" or "[0]" after a segment, a leading
// "cluster." and a trailing "." are accepted). depth is how many levels of nested fields to include:
// 1 lists the field's own fields, 0 none, a negative depth all (--recursive). Errors: an
// *UnknownFieldError for a segment that names no field, or a path into a scalar.
func (d *Doc) Explain(path string, depth int) (Field, error) {
	segs, err := splitPath(path)
	if err != nil {
		return Field{}, err
	}
	cur := d.root
	parent := ""
	for _, seg := range segs {
		obj, name := d.resolve(cur)
		if v := d.mapValue(obj); v != nil {
			// A map: a segment naming a field of its values steps into them (as a list does);
			// any other segment is a key, and the path goes on in that key's value.
			if vo, _ := d.resolve(v); vo.prop(seg) == nil {
				cur = v
				parent = join(parent, seg)
				continue
			}
		}
		obj, _ = d.elem(obj)
		p := obj.prop(seg)
		if p == nil {
			known := obj.names()
			return Field{}, &UnknownFieldError{Path: strings.Join(segs, "."), Parent: parent, Field: seg,
				Type: typeName(d, cur, name), Known: known, Suggestions: suggest(seg, known)}
		}
		cur = p
		parent = join(parent, seg)
	}
	return d.field(strings.Join(segs, "."), cur, depth), nil
}

// elem steps into a list's elements or a map's values (a list or map of objects explains as its
// element).
func (d *Doc) elem(s *Schema) (*Schema, string) {
	if s.Type == "array" && s.Items != nil {
		return d.resolve(s.Items)
	}
	if v := d.mapValue(s); v != nil {
		return d.resolve(v)
	}
	return s, ""
}

// mapValue returns the schema of a map's values (additionalProperties as a schema), or nil.
func (d *Doc) mapValue(s *Schema) *Schema {
	if s.Type != "object" || len(s.AddlProps) == 0 || s.AddlProps[0] != '{' {
		return nil
	}
	var v Schema
	if json.Unmarshal(s.AddlProps, &v) != nil {
		return nil
	}
	return &v
}

func (s *Schema) prop(name string) *Schema {
	for _, p := range s.Properties {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

func (s *Schema) names() []string {
	out := make([]string, len(s.Properties))
	for i, p := range s.Properties {
		out[i] = p.Name
	}
	return out
}

func (d *Doc) field(path string, s *Schema, depth int) Field {
	node, name := d.resolve(s)
	f := Field{Path: path, Type: "<" + typeName(d, s, name) + ">", Description: firstNonEmpty(s.Description, node.Description), Pattern: node.Pattern}
	vals := node
	if node.Type == "array" && node.Items != nil { // a list of enum values: the elements' values
		vals, _ = d.resolve(node.Items)
	}
	for _, v := range vals.Enum {
		f.Values = append(f.Values, fmt.Sprint(v))
	}
	if node.Const != nil {
		f.Values = append(f.Values, fmt.Sprint(node.Const))
	}
	if depth == 0 {
		return f
	}
	obj, _ := d.elem(node)
	for _, p := range obj.Properties {
		f.Fields = append(f.Fields, d.field(join(path, p.Name), p.Schema, depth-1))
	}
	return f
}

// typeName is s's type in kubectl explain's words; name is the definition s resolved to, if any.
func typeName(d *Doc, s *Schema, name string) string {
	node, n := d.resolve(s)
	if name == "" {
		name = n
	}
	switch {
	case name != "":
		return name
	case node.Type == "array" && node.Items != nil:
		return "[]" + typeName(d, node.Items, "")
	case node.Type == "object" && len(node.AddlProps) > 0 && string(node.AddlProps) != "false":
		var v Schema
		if json.Unmarshal(node.AddlProps, &v) == nil {
			return "map[string]" + typeName(d, &v, "")
		}
		return "object"
	case node.Type != "":
		return node.Type
	}
	return "any"
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// splitPath normalises a dotted path into its segments: a leading "cluster." (or "Cluster.") and a
// trailing "." are dropped, "[]", "[*]" or "[N]" after a segment too. An empty segment ("spec..etcd")
// or another bracket is a *PathError.
func splitPath(path string) ([]string, error) {
	orig := path
	path = strings.TrimSuffix(strings.TrimSpace(path), ".")
	for _, root := range []string{"cluster", "Cluster"} {
		if path == root {
			path = ""
		}
		path = strings.TrimPrefix(path, root+".")
	}
	if path == "" {
		return nil, nil
	}
	var segs []string
	for _, s := range strings.Split(path, ".") {
		if i := strings.IndexByte(s, '['); i >= 0 {
			idx := s[i:]
			if !indexRE.MatchString(idx) {
				return nil, &PathError{Path: orig, Problem: fmt.Sprintf("%q: an index is [], [*] or [N]", s)}
			}
			s = s[:i]
		}
		if s == "" {
			return nil, &PathError{Path: orig, Problem: "an empty segment: write fields separated by single dots, e.g. spec.etcd.dataDir"}
		}
		segs = append(segs, s)
	}
	return segs, nil
}

var indexRE = regexp.MustCompile(`^\[(\*|[0-9]*)\]$`)

// PathError is a path explain cannot read.
type PathError struct{ Path, Problem string }

// ExitCode returns 2 (invalid input, found locally).
func (e *PathError) ExitCode() int { return 2 }

func (e *PathError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Problem) }

// suggest returns the names within edit distance 2 of seg (or equal ignoring case), nearest first.
func suggest(seg string, names []string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		d := levenshtein.ComputeDistance(strings.ToLower(seg), strings.ToLower(n))
		if d <= 2 || strings.HasPrefix(strings.ToLower(n), strings.ToLower(seg)) && len(seg) >= 3 {
			cs = append(cs, cand{n, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.name)
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// Print writes f as kubectl explain does: KIND and VERSION, the field with its type, its
// description and its fields (indented by depth). kind and version head the output.
func Print(w io.Writer, kind, version string, f Field) {
	fmt.Fprintf(w, "KIND:     %s\nVERSION:  %s\n\n", kind, version)
	if f.Path != "" {
		fmt.Fprintf(w, "FIELD:    %s %s\n\n", f.Path[strings.LastIndexByte(f.Path, '.')+1:], f.Type)
	}
	fmt.Fprintf(w, "DESCRIPTION:\n%s\n", indent(f.Description, "    "))
	if len(f.Values) > 0 {
		fmt.Fprintf(w, "\nVALUES:\n    %s\n", strings.Join(f.Values, ", "))
	}
	if f.Pattern != "" {
		fmt.Fprintf(w, "\nPATTERN:\n    %s\n", f.Pattern)
	}
	if len(f.Fields) > 0 {
		fmt.Fprintf(w, "\nFIELDS:\n")
		printFields(w, f.Fields, "  ")
	}
}

func printFields(w io.Writer, fs []Field, pad string) {
	for _, c := range fs {
		name := c.Path[strings.LastIndexByte(c.Path, '.')+1:]
		fmt.Fprintf(w, "%s%s\t%s\n", pad, name, c.Type)
		if c.Description != "" {
			fmt.Fprintf(w, "%s\n", indent(c.Description, pad+"  "))
		}
		if len(c.Fields) > 0 {
			printFields(w, c.Fields, pad+"    ")
		}
		fmt.Fprintln(w)
	}
}

func indent(s, pad string) string {
	if s == "" {
		return pad + "<empty>"
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}
