package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"
)

// Decode decodes one spec document, then defaults it (SetDefaults with dirs) and validates it
// (Validate with failover). It is pure: the bytes, the directories and the failover rule come from
// the caller (specload.Load and specload.Decode read the file and pass lb.FailoverRule).
//
// source names the document in messages ("cluster.yaml:14: spec.hosts[1].zonee: unknown field
// \"zonee\""); dirs are what local paths resolve against (Dirs).
//
// Decoding is strict: the YAML is parsed into go.yaml.in/yaml/v3 nodes and walked against the json
// tags of Cluster, so an unknown field, a value of the wrong type, a duplicate key, a second YAML
// document, or an apiVersion/kind other than hactl.io/v1alpha1 Cluster is a *DecodeError naming the
// field path and line; every such problem in the document is reported at once. The checked values
// are then decoded with sigs.k8s.io/yaml (from a JSON rendering of the walked nodes, so YAML 1.1 vs
// 1.2 scalar rules can't make the two passes disagree). A broken rule is a *ValidationError whose
// lines carry "source:line:" where the field (or its nearest parent) appears in the document.
//
// Errors: *DecodeError or *ValidationError, both with ExitCode() == 2. Warnings are returned even
// when the error is a *ValidationError.
func Decode(data []byte, source string, dirs Dirs, failover FailoverRule) (*Cluster, []Warning, error) {
	c, lines, err := decodeStrict(data, source)
	if err != nil {
		return nil, nil, err
	}
	SetDefaults(c, dirs)
	c.lines = lines
	errs, warns := Validate(c, failover)
	if len(errs) > 0 {
		return nil, warns, &ValidationError{Source: source, Errors: errs, lines: lines}
	}
	return c, warns, nil
}

// Problem is one decode problem: where it is and what is wrong.
type Problem struct {
	// Line is the 1-based line in the document, 0 when unknown.
	Line int
	// Field is the field path (e.g. spec.hosts[1].zone), "" when the problem is not about a field.
	Field string
	// Message says what is wrong and how to fix it.
	Message string
}

// String renders the problem as "line: field: message" (parts that are unknown are left out).
func (p Problem) String() string {
	var b strings.Builder
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// DecodeError is returned when a spec document can't be read or decoded. It lists every problem
// found, one per line of Error(); its exit code is 2 (invalid input, found before any host is
// contacted).
type DecodeError struct {
	// Source names the document (usually the file path).
	Source string
	// Problems found, in document order.
	Problems []Problem
	// Err is the underlying error when there is one (e.g. the *fs.PathError of a spec file
	// specload could not read), for errors.Is/As.
	Err error
}

// Error returns one line per problem, each "source:line: field: message".
func (e *DecodeError) Error() string {
	lines := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		lines = append(lines, prefix(e.Source, p.Line)+p.String())
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the underlying error, if any.
func (e *DecodeError) Unwrap() error { return e.Err }

// ExitCode is 2: the input is invalid.
func (e *DecodeError) ExitCode() int { return 2 }

// prefix renders "source:line: " with whatever of the two is known.
func prefix(source string, line int) string {
	switch {
	case source != "" && line > 0:
		return fmt.Sprintf("%s:%d: ", source, line)
	case source != "":
		return source + ": "
	case line > 0:
		return fmt.Sprintf("line %d: ", line)
	}
	return ""
}

// yamlLineRE extracts the line from go.yaml.in/yaml/v3 syntax errors ("yaml: line 3: ...").
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// maxNodes bounds the walk so alias expansion can't blow it up ("billion laughs").
const maxNodes = 100000

// decodeStrict parses data, checks it against Cluster and decodes it. It returns the index of field
// paths to lines.
func decodeStrict(data []byte, source string) (*Cluster, map[string]int, error) {
	fail := func(ps ...Problem) (*Cluster, map[string]int, error) {
		return nil, nil, &DecodeError{Source: source, Problems: ps}
	}

	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(syntaxProblem(err, data))
		}
		if !emptyDocument(&n) {
			docs = append(docs, &n)
		}
	}
	switch {
	case len(docs) == 0:
		return fail(Problem{Line: 1, Message: "the spec is empty; it must hold one document with apiVersion: " + APIVersion + " and kind: " + Kind + " (`hactl init` writes an example)"})
	case len(docs) > 1:
		return fail(Problem{Line: docs[1].Line, Message: fmt.Sprintf("a second YAML document starts here; a spec file holds exactly one %s document, remove the other documents (and the '---' separating them)", Kind)})
	}
	root := docs[0].Content[0]
	if root.Kind != yaml.MappingNode {
		return fail(Problem{Line: root.Line, Message: fmt.Sprintf("the document must be a mapping with apiVersion, kind, metadata and spec, got %s", describe(root))})
	}
	if ps := checkTypeMeta(root); len(ps) > 0 {
		return fail(ps...)
	}

	w := &walker{lines: map[string]int{"": root.Line}}
	tree := w.value(root, reflect.TypeFor[Cluster](), nil)
	if len(w.problems) > 0 {
		return fail(w.problems...)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		return fail(Problem{Message: "internal error rendering the spec: " + err.Error()})
	}
	var c Cluster
	if err := sigsyaml.UnmarshalStrict(js, &c); err != nil {
		// The walk already checked names and types, so this is unexpected; report it anyway.
		return fail(Problem{Message: err.Error()})
	}
	c.explicitZeros = w.zeros
	return &c, w.lines, nil
}

// syntaxProblem turns a YAML parser error into a Problem, with its line when the parser gave one.
func syntaxProblem(err error, data []byte) Problem {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p := Problem{Line: line, Message: "invalid YAML: " + m[2]}
		if tabIndented(data, line) {
			p.Message += "; YAML does not allow tabs for indentation: indent with spaces"
		}
		return p
	}
	return Problem{Message: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// tabIndented reports whether a tab appears in the leading white space of line (1-based) or of the
// line after it (go.yaml.in/yaml/v3 reports some errors one line early).
func tabIndented(data []byte, line int) bool {
	lines := bytes.Split(data, []byte("\n"))
	for _, l := range []int{line, line + 1} {
		if l < 1 || l > len(lines) {
			continue
		}
		text := lines[l-1]
		indent := text[:len(text)-len(bytes.TrimLeft(text, " \t"))]
		if bytes.IndexByte(indent, '\t') >= 0 {
			return true
		}
	}
	return false
}

// emptyDocument reports whether a document node holds nothing (e.g. after a trailing "---").
func emptyDocument(n *yaml.Node) bool {
	if n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return true
	}
	c := n.Content[0]
	return c.Kind == yaml.ScalarNode && c.Tag == "!!null"
}

// checkTypeMeta checks apiVersion and kind before anything else, so a document of another version
// gets one clear message rather than a list of unknown fields.
func checkTypeMeta(root *yaml.Node) []Problem {
	var ps []Problem
	check := func(key, want, hint string) {
		k, v := lookup(root, key)
		switch {
		case v == nil:
			ps = append(ps, Problem{Line: root.Line, Field: key, Message: fmt.Sprintf("required; add `%s: %s` at the top of the spec", key, want)})
		case v.Kind != yaml.ScalarNode || v.Tag != "!!str":
			ps = append(ps, Problem{Line: k.Line, Field: key, Message: fmt.Sprintf("must be the string %q, got %s", want, describe(v))})
		case v.Value != want:
			ps = append(ps, Problem{Line: k.Line, Field: key, Message: fmt.Sprintf("unsupported value %s: %s; set `%s: %s`", quoteValue(v.Value), hint, key, want)})
		}
	}
	check("apiVersion", APIVersion, "this hactl reads only "+APIVersion)
	check("kind", Kind, "a hactl spec document is of kind "+Kind)
	return ps
}

// lookup finds key in a mapping node (the first occurrence).
func lookup(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], resolve(m.Content[i+1])
		}
	}
	return nil, nil
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// walker checks YAML nodes against Go types (by json tag), records path -> line, and builds a
// JSON-ready tree of the checked values.
type walker struct {
	lines    map[string]int
	problems []Problem
	visited  int
	zeros    []zeroField // int fields set to 0 and duration fields set to a zero duration
}

func (w *walker) problem(line int, path *field.Path, format string, args ...any) {
	w.problems = append(w.problems, Problem{Line: line, Field: pathString(path), Message: fmt.Sprintf(format, args...)})
}

func pathString(p *field.Path) string {
	if p == nil {
		return ""
	}
	return p.String()
}

func child(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

var durationType = reflect.TypeFor[Duration]()

// value checks n against t and returns the JSON-ready value (nil for YAML null: the field keeps its
// zero value, which defaulting may fill).
func (w *walker) value(n *yaml.Node, t reflect.Type, path *field.Path) any {
	n = resolve(n)
	if w.visited++; w.visited > maxNodes {
		if w.visited == maxNodes+1 {
			w.problem(n.Line, path, "the document is too large (more than %d nodes, counting alias expansions)", maxNodes)
		}
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Tag != "" && !strings.HasPrefix(n.Tag, "!!") {
		w.problem(n.Line, path, "custom YAML tag %s is not supported; remove it", n.Tag)
		return nil
	}

	if t.Kind() == reflect.Pointer { // optional sections (spec.ssh.bastion, spec.etcd.download); null left them nil above
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			w.problem(n.Line, path, "must be a duration string with a unit such as \"100ms\", \"10s\" or \"2m\", got %s", describe(n))
			return nil
		}
		d, err := time.ParseDuration(n.Value)
		if err != nil {
			w.problem(n.Line, path, "invalid duration %s: write a number with a unit such as \"100ms\", \"10s\" or \"2m\"", quoteValue(n.Value))
			return nil
		}
		if d == 0 {
			w.zeros = append(w.zeros, zeroField{path, n.Value})
		}
		return n.Value
	case t.Kind() == reflect.Struct:
		return w.mapping(n, t, path)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		return w.dict(n, t, path)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.problem(n.Line, path, "must be a list, got %s", describe(n))
			return nil
		}
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			p := path.Index(i)
			w.lines[p.String()] = item.Line
			out = append(out, w.value(item, t.Elem(), p))
		}
		return out
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = "; quote it: " + quoteValue(n.Value)
			}
			w.problem(n.Line, path, "must be a string, got %s%s", describe(n), hint)
			return nil
		}
		return n.Value
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			w.problem(n.Line, path, "must be true or false, got %s", describe(n))
			return nil
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			w.problem(n.Line, path, "must be true or false: %v", err)
			return nil
		}
		return b
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!float" && isDigits(strings.TrimPrefix(n.Value, "-")) {
			// go.yaml.in/yaml/v3 tags an integer too large for int64 as a float.
			w.problem(n.Line, path, "integer %s is out of range", quoteValue(n.Value))
			return nil
		}
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			w.problem(n.Line, path, "must be an integer, got %s", describe(n))
			return nil
		}
		var i int64
		if err := n.Decode(&i); err != nil || reflect.Zero(t).OverflowInt(i) {
			w.problem(n.Line, path, "integer %s is out of range", n.Value)
			return nil
		}
		if i == 0 {
			w.zeros = append(w.zeros, zeroField{path, n.Value})
		}
		return i
	}
	// Not reachable for the spec types; keep the walk honest if a new kind of field is added.
	w.problem(n.Line, path, "internal error: field type %s is not handled by the strict decoder", t)
	return nil
}

// mapping checks a mapping node against struct type t.
func (w *walker) mapping(n *yaml.Node, t reflect.Type, path *field.Path) any {
	if n.Kind != yaml.MappingNode {
		w.problem(n.Line, path, "must be a mapping (key: value lines), got %s", describe(n))
		return nil
	}
	fields := jsonFields(t)
	seen := map[string]int{}
	out := map[string]any{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!merge") {
			w.problem(k.Line, path, "keys must be plain field names, got %s", describe(k))
			continue
		}
		if k.Tag == "!!merge" {
			w.problem(k.Line, path, "YAML merge keys (<<) are not supported; write the fields out")
			continue
		}
		p := child(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			w.problem(k.Line, p, "duplicate key %q (first set on line %d); keep only one", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		ft, ok := fields[k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown field %q", k.Value)
			if s := suggest(k.Value, fields); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; known fields: " + strings.Join(sortedKeys(fields), ", ")
			}
			w.problems = append(w.problems, Problem{Line: k.Line, Field: p.String(), Message: msg})
			continue
		}
		w.lines[p.String()] = k.Line
		if val := w.value(v, ft, p); val != nil {
			out[k.Value] = val
		}
	}
	return out
}

// dict checks a mapping node against a map type with string keys (e.g. spec.loadBalancer.priorities:
// host name -> priority). Entries are recorded under path[key].
func (w *walker) dict(n *yaml.Node, t reflect.Type, path *field.Path) any {
	if n.Kind != yaml.MappingNode {
		w.problem(n.Line, path, "must be a mapping (key: value lines), got %s", describe(n))
		return nil
	}
	seen := map[string]int{}
	out := map[string]any{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			hint := ""
			if k.Kind == yaml.ScalarNode && k.Tag != "!!merge" {
				hint = "; quote it: " + quoteValue(k.Value)
			}
			w.problem(k.Line, path, "keys must be strings, got %s%s", describe(k), hint)
			continue
		}
		p := path.Key(k.Value)
		if first, dup := seen[k.Value]; dup {
			w.problem(k.Line, p, "duplicate key %q (first set on line %d); keep only one", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		w.lines[p.String()] = k.Line
		if val := w.value(v, t.Elem(), p); val != nil {
			out[k.Value] = val
		}
	}
	return out
}

// jsonFields maps the json names of t's exported fields to their types (embedded structs without
// a tag are inlined, as encoding/json does).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]reflect.Type) []string { return slices.Sorted(maps.Keys(m)) }

// suggest returns the known field closest to name (case-insensitive edit distance <= 2), or "".
func suggest(name string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for _, k := range sortedKeys(fields) {
		if d := levenshtein.ComputeDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// isDigits reports whether s is a non-empty string of ASCII digits.
func isDigits(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' })
}

// describe names what a node is, for type errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		kind := map[string]string{"!!str": "string", "!!int": "integer", "!!float": "number", "!!bool": "boolean", "!!null": "null"}[n.Tag]
		if kind == "" {
			kind = n.Tag
		}
		return fmt.Sprintf("%s %s", kind, quoteValue(n.Value))
	}
	return "an unsupported YAML node"
}

// maxQuotedValue bounds how much of a value messages quote.
const maxQuotedValue = 64

// quoteValue quotes a value from the document for a message. Values that look like key material
// (a PEM block, e.g. when -f names a private key by mistake) are never echoed, and long values are
// cut: error messages end up in terminals, CI logs and bug reports.
func quoteValue(v string) string {
	if looksLikeSecret(v) {
		return "(value not shown: it looks like a private key or certificate)"
	}
	if r := []rune(v); len(r) > maxQuotedValue {
		return strconv.Quote(string(r[:maxQuotedValue])) + fmt.Sprintf("... (%d characters)", len(r))
	}
	return strconv.Quote(v)
}

// looksLikeSecret reports whether s looks like PEM or OpenSSH key material rather than a value a
// spec would hold; such strings are never echoed in messages.
func looksLikeSecret(s string) bool {
	return strings.Contains(s, "-----BEGIN ") || strings.Contains(s, "PRIVATE KEY") ||
		strings.Contains(s, "b3BlbnNzaC1rZXktdjE") // base64 of "openssh-key-v1"
}
