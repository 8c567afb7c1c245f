package docs

// The docs are checked against the CLI and the spec decoder, so they cannot drift
// (TestDocCommands, TestDocSpecs, TestDocFieldPaths). The files are README.md and docs/**/*.md.
//
// Commands. Every `hactl …` command line of the docs is parsed by hactl's own cobra tree
// (app.NewRootCommand; nothing runs): the command must exist (root.Find), every flag must exist and
// take the value given (cmd.ParseFlags), and the positional arguments must be accepted (the
// command's Args: a group given an unknown subcommand, "hactl operator status", fails here as it
// exits 2 for a user). Fenced blocks other than YAML are read as shell. A command line is a simple shell command whose command word is `hactl` or `…/hactl` (bin/hactl), after
// environment assignments (`X=1 hactl …`), `sudo` and a `$ ` prompt; lines ending in `\` continue
// on the next; `;`, `&&`, `||` and a standalone `|` separate commands; comments and redirections
// are dropped; `F='-f x.yaml'` on a line of its own sets F for the block's later `$F`. Inline code
// (`hactl status -o json`, also across a line break, `\|` in tables read as `|`) is checked the
// the same way, except that it may name a command without all the arguments it needs (`hactl etcd
// member remove`; too many, or an unknown subcommand, still fail). The docs'
// notation: `[…]` marks optional words, which are checked as if given; `a|b` inside a word is one
// line per alternative; placeholders (`<name>`, `NAME`, `N`, `...`, `…`, an unset `$VAR`) are
// accepted as arguments, a flag's placeholder value is replaced by a valid value of the flag's
// type, and a placeholder where a subcommand goes (`hactl drill ...`) names the group only. A
// `hactl explain PATH` must name a field of the spec.
//
// Spec snippets. Every fenced block whose info string starts with `yaml` (or `yml`) is a piece of
// a cluster spec unless the info string also says `not-hactl-spec` (```yaml not-hactl-spec, e.g.
// a CI workflow; renderers show it as YAML still). The rule for the rest:
//   - a block with a top-level `apiVersion:` is a whole spec: the decoder must accept it (strict:
//     an unknown field, a wrong type or a duplicate key fails) and so must validation, except
//     errors about a value that is a placeholder (`sha256: <the release's sha256>`);
//   - any other block is a fragment, written where it sits in a spec file: either from `spec:` at
//     column 0, or spec's fields indented by two spaces (`  hosts:` …). It is decoded strictly
//     under a generated apiVersion/kind/metadata (and `spec:`); validation is not run, since a
//     fragment leaves out what it does not show. A block indented otherwise fails: indent it as
//     in the spec, or mark it not-hactl-spec.
//
// Field paths. Inline code that is a whole spec path (`spec.etcd.download.url`,
// `spec.hosts[0].zone`) must name a field: of the cluster spec (hactl explain's schema) when its
// first field is one of the cluster spec's, else of the spec of an operator resource (EtcdCluster,
// EtcdSnapshot: their CRDs' schemas), else it must be one of otherSpecPaths (another object's,
// e.g. a Node's spec.podCIDR).
//
// Failures name file:line and the reason.

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/api/v1alpha1/explain"
	"github.com/hactl/hactl/cmd/hactl/app"
	"github.com/hactl/hactl/operator/crds"
	"github.com/hactl/hactl/specload"
)

// docCommand is one hactl command line found in the docs.
type docCommand struct {
	where string // "file:line"
	text  string // as written (joined), for the message
	args  []word // the words after hactl
	prose bool   // inline code: it may name the command without the arguments it needs
}

// docCommands returns every hactl command line of the docs.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	var out []docCommand
	for _, name := range docFiles(t) {
		f := readMarkdown(t, name)
		for _, b := range f.blocks {
			if yamlBlock(b.info) {
				continue
			}
			vars := map[string]string{}
			for i := 0; i < len(b.lines); i++ {
				line, start := b.lines[i], i
				for strings.HasSuffix(line, `\`) && i+1 < len(b.lines) {
					i++
					line = strings.TrimSuffix(line, `\`) + " " + b.lines[i]
				}
				for _, c := range shellCommands(line) {
					if args, ok := hactlArgs(c, vars); ok {
						out = append(out, docCommand{where: fmt.Sprintf("%s:%d", name, b.line+start), text: strings.TrimSpace(line), args: args})
					}
				}
			}
		}
		for _, s := range f.spans {
			for _, c := range shellCommands(s.text) {
				if args, ok := hactlArgs(c, nil); ok {
					out = append(out, docCommand{where: fmt.Sprintf("%s:%d", name, s.line), text: s.text, args: args, prose: true})
				}
			}
		}
	}
	return out
}

func TestDocCommands(t *testing.T) {
	cmds := docCommands(t)
	if len(cmds) < 100 {
		t.Fatalf("found %d hactl command lines in the docs, fewer than 100: is the extraction broken?", len(cmds))
	}
	for _, c := range cmds {
		if err := checkCommand(c.args, c.prose); err != nil {
			t.Errorf("%s: %s: %v", c.where, c.text, err)
		}
	}
}

// checkCommand checks every line args stands for (alternatives).
func checkCommand(args []word, prose bool) error {
	for _, alt := range alternatives(args) {
		if err := checkLine(alt, prose); err != nil {
			if len(alternatives(args)) > 1 {
				return fmt.Errorf("as %q: %w", "hactl "+texts(alt, " "), err)
			}
			return err
		}
	}
	return nil
}

func texts(ws []word, sep string) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.text
	}
	return strings.Join(s, sep)
}

// checkLine parses one command line with hactl's command tree: the command, its flags and their
// values, its arguments (with prose, too few are fine). It runs nothing.
func checkLine(ws []word, prose bool) error {
	root := app.NewRootCommand(app.Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	args := make([]string, len(ws))
	for i, w := range ws {
		args[i] = w.text
	}
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	_ = cmd.InheritedFlags() // merges the parents' persistent flags into cmd.Flags()
	fillPlaceholders(cmd.Flags(), rest)
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	pos := cmd.Flags().Args()
	if cmd.HasAvailableSubCommands() && len(pos) > 0 && isPlaceholder(word{text: pos[0]}) {
		return nil // "hactl drill ...": the group
	}
	if err := cmd.ValidateArgs(pos); err != nil && !(prose && fewArgs(cmd, pos)) {
		return err
	}
	if cmd.Name() == "explain" && cmd.Parent() == root && len(pos) == 1 && !isPlaceholder(word{text: pos[0]}) {
		return explainPath(pos[0])
	}
	return nil
}

// fewArgs reports whether cmd, a command without subcommands, accepts pos with one to three more
// arguments: pos named it without all of its arguments.
func fewArgs(cmd *cobra.Command, pos []string) bool {
	if cmd.HasSubCommands() {
		return false
	}
	for n := 1; n <= 3; n++ {
		pos = append(pos, "x")
		if cmd.ValidateArgs(pos) == nil {
			return true
		}
	}
	return false
}

// fillPlaceholders replaces, in args, a placeholder given as a flag's value (`--identity-file KEY`,
// `--kubeconfig=…`) by a value of the flag's type (sampleValue). Unknown flags are left to
// ParseFlags.
func fillPlaceholders(fs *pflag.FlagSet, args []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, value, inline := strings.Cut(a, "=")
		var f *pflag.Flag
		if n, ok := strings.CutPrefix(name, "--"); ok {
			f = fs.Lookup(n)
		} else if len(name) == 2 {
			f = fs.ShorthandLookup(name[1:])
		}
		switch {
		case f == nil:
		case inline && isPlaceholder(word{text: value}):
			args[i] = name + "=" + sampleValue(f)
		case !inline && f.NoOptDefVal == "" && i+1 < len(args):
			if isPlaceholder(word{text: args[i+1]}) {
				args[i+1] = sampleValue(f)
			}
			i++
		}
	}
}

// sampleValue is a value f accepts: one of its type, else its default, else "x".
func sampleValue(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return "true"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "count":
		return "1"
	case "duration":
		return "1s"
	case "stringToString", "stringToInt":
		return "a=1"
	case "ip":
		return "10.0.0.1"
	}
	if d := strings.Trim(f.DefValue, "[]"); d != "" {
		return d
	}
	return "x"
}

// explainPath checks that path names a field of the spec (hactl explain's schema).
func explainPath(path string) error {
	d, err := explain.Parse(v1alpha1.JSONSchema)
	if err != nil {
		return err
	}
	_, err = d.Explain(path, 0)
	return err
}

// specPathRE matches inline code that is a whole spec field path.
var specPathRE = regexp.MustCompile(`^spec(\.[A-Za-z][A-Za-z0-9]*|\[[0-9]*\])+$`)

// indexRE matches a list index in a field path ("[0]", "[]").
var indexRE = regexp.MustCompile(`\[[0-9]*\]`)

// otherSpecPaths are spec paths the docs name of objects that are neither hactl's cluster spec nor
// an operator resource, with whose they are.
var otherSpecPaths = map[string]string{
	"spec.podCIDR": "a Node's",
}

// checkSpecPath checks a spec path (list indexes dropped) by the rule of this file's comment.
func checkSpecPath(path string) error {
	err := explainPath(path)
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "spec."), ".")
	if err == nil || explainPath("spec."+first) == nil {
		return err
	}
	found, crdErr := inOperatorSpec(strings.Split(strings.TrimPrefix(path, "spec."), "."))
	switch {
	case crdErr != nil:
		return crdErr
	case found:
		return nil
	case otherSpecPaths[path] != "":
		return nil
	}
	return fmt.Errorf("%w; nor a field of EtcdCluster's or EtcdSnapshot's spec (operator/crds), nor one of otherSpecPaths", err)
}

// inOperatorSpec reports whether the spec of one of the operator's CRDs has the field at segs.
func inOperatorSpec(segs []string) (bool, error) {
	files, names, err := crds.Files()
	if err != nil {
		return false, err
	}
	for _, n := range names {
		var crd struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema crdSchema `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := sigsyaml.Unmarshal(files[n], &crd); err != nil {
			return false, fmt.Errorf("%s: %w", n, err)
		}
		for _, v := range crd.Spec.Versions {
			s, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
			for _, seg := range segs {
				if !ok {
					break
				}
				for s.Items != nil {
					s = *s.Items
				}
				s, ok = s.Properties[seg]
			}
			if ok {
				return true, nil
			}
		}
	}
	return false, nil
}

// crdSchema is the part of a CRD's OpenAPI schema inOperatorSpec walks.
type crdSchema struct {
	Properties map[string]crdSchema `json:"properties"`
	Items      *crdSchema           `json:"items"`
}

func TestDocFieldPaths(t *testing.T) {
	n := 0
	for _, name := range docFiles(t) {
		for _, s := range readMarkdown(t, name).spans {
			if !specPathRE.MatchString(s.text) {
				continue
			}
			n++
			if err := checkSpecPath(indexRE.ReplaceAllString(s.text, "")); err != nil {
				t.Errorf("%s:%d: `%s`: %v", name, s.line, s.text, err)
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d spec field paths in the docs, fewer than 20: is the extraction broken?", n)
	}
}

// yamlBlock reports whether a fenced block's info string makes it YAML.
func yamlBlock(info string) bool {
	lang, _, _ := strings.Cut(info, " ")
	return lang == "yaml" || lang == "yml"
}

func TestDocSpecs(t *testing.T) {
	n := 0
	for _, name := range docFiles(t) {
		for _, b := range readMarkdown(t, name).blocks {
			if !yamlBlock(b.info) || strings.Contains(b.info, "not-hactl-spec") {
				continue
			}
			n++
			for _, p := range checkSpecBlock(b) {
				t.Errorf("%s:%s", name, p)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d spec snippets in the docs, fewer than 10: is the extraction broken?", n)
	}
}

// Envelopes put a fragment where it sits in a spec: from `spec:` (fragmentTop) or inside it
// (fragmentBody).
const (
	fragmentTop  = "apiVersion: " + v1alpha1.APIVersion + "\nkind: " + v1alpha1.Kind + "\nmetadata: {name: docs}\n"
	fragmentBody = fragmentTop + "spec:\n"
)

// checkSpecBlock decodes one YAML block by the rule of this file's comment; it returns the problems
// as "line: reason", the line in the Markdown file.
func checkSpecBlock(b mdBlock) []string {
	indent, top := -1, map[string]bool{}
	for _, l := range b.lines {
		s := strings.TrimLeft(l, " ")
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if n := len(l) - len(s); indent < 0 || n < indent {
			indent = n
		}
		if len(l) == len(s) {
			key, _, _ := strings.Cut(s, ":")
			top[key] = true
		}
	}
	body := strings.Join(b.lines, "\n") + "\n"
	var envelope string
	switch {
	case top["apiVersion"]:
	case indent == 0 && len(top) == 1 && top["spec"]:
		envelope = fragmentTop
	case indent == 2:
		envelope = fragmentBody
	default:
		return []string{fmt.Sprintf("%d: a YAML block that is neither a whole spec nor a fragment starting at `spec:` or indented by two under spec (see docs/cli_test.go); place it as in a spec file or mark it ```yaml not-hactl-spec", b.line)}
	}
	offset := b.line - 1 - strings.Count(envelope, "\n")
	line := func(l int) int {
		if l <= 0 {
			return b.line
		}
		return l + offset
	}
	_, _, err := specload.Decode([]byte(envelope+body), "", "")
	var (
		de *v1alpha1.DecodeError
		ve *v1alpha1.ValidationError
	)
	var out []string
	switch {
	case err == nil:
	case errors.As(err, &de):
		for _, p := range de.Problems {
			out = append(out, fmt.Sprintf("%d: %s", line(p.Line), p.String()))
		}
	case errors.As(err, &ve):
		if envelope != "" {
			break // a fragment: decoding is what is checked
		}
		for _, fe := range ve.Errors {
			if v, ok := fe.BadValue.(string); ok && isPlaceholder(word{text: v}) {
				continue
			}
			out = append(out, fmt.Sprintf("%d: %s", line(ve.Line(fe.Field)), fe.Error()))
		}
	default:
		out = append(out, fmt.Sprintf("%d: %v", b.line, err))
	}
	return out
}

// TestDocCheckerFails shows the checks fail on what the docs must not say.
func TestDocCheckerFails(t *testing.T) {
	bad := []string{
		"hactl operator status -f cluster.yaml",       // no such subcommand: exits 2
		"hactl status --no-such-flag",                 // no such flag
		"hactl drill ... --no-such-flag",              // a group's flags are checked too
		"hactl explain spec.kubernetes.images",        // no such field
		"hactl scheduler deploy --replicas many",      // not an int
		"hactl status extra",                          // no arguments
		"hactl scheduler config|deploy|nosuch",        // one alternative is wrong
		"X=1 bin/hactl backup verify latest --nosuch", // prefix and bin/
	}
	for _, line := range bad {
		cmds := shellCommands(line)
		args, ok := hactlArgs(cmds[0], nil)
		if !ok {
			t.Errorf("%q: not read as a hactl command", line)
			continue
		}
		if err := checkCommand(args, false); err == nil {
			t.Errorf("%q: accepted", line)
		}
	}
	good := []string{
		"hactl scheduler status -f cluster.yaml [-o json]",
		"hactl backup verify [NAME|latest] -f cluster.yaml [--identity-file KEY]",
		"hactl reset --hosts ... --yes",
		"hactl drill ...",
		"hactl explain spec.<field>",
		"hactl restore -f cluster.yaml --from latest|s3://BUCKET/KEY|./file.db [--force] [--yes]",
	}
	for _, line := range good {
		args, _ := hactlArgs(shellCommands(line)[0], nil)
		if err := checkCommand(args, false); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	if args, _ := hactlArgs(shellCommands("hactl etcd member remove")[0], nil); checkCommand(args, true) != nil || checkCommand(args, false) == nil {
		t.Error("hactl etcd member remove: prose may leave out the member, a command line may not")
	}
	whole := mdBlock{line: 1, lines: []string{"apiVersion: " + v1alpha1.APIVersion, "kind: " + v1alpha1.Kind, "metadata: {name: x}", "spec: {hosts: []}"}}
	if ps := checkSpecBlock(whole); len(ps) == 0 {
		t.Error("a whole spec without hosts: accepted")
	}
	frag := mdBlock{line: 10, lines: []string{"  etcd:", "    versoin: v3.6.16"}}
	if ps := checkSpecBlock(frag); len(ps) != 1 || !strings.HasPrefix(ps[0], "11: spec.etcd.versoin") {
		t.Errorf("fragment with an unknown field: %q", ps)
	}
}

func TestShellCommands(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string // each command's words joined by " "
	}{
		{`hactl status -f c.yaml -o json | jq .`, []string{"hactl status -f c.yaml -o json", "jq ."}},
		{`A=1 hactl x --reason "kernel upgrade"; hactl y # comment`, []string{"A=1 hactl x --reason kernel upgrade", "hactl y"}},
		{`hactl config > out.yaml 2>&1 && make x`, []string{"hactl config", "make x"}},
		{`hactl scheduler config|deploy`, []string{"hactl scheduler config|deploy"}},
	} {
		var got []string
		for _, c := range shellCommands(tc.line) {
			got = append(got, texts(c, " "))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%q: got %q, want %q", tc.line, got, tc.want)
		}
	}
	vars := map[string]string{}
	hactlArgs(shellCommands(`F='-f .lab/c.yaml'`)[0], vars)
	args, ok := hactlArgs(shellCommands(`bin/hactl drill cleanup $F --yes`)[0], vars)
	if !ok || texts(args, " ") != "drill cleanup -f .lab/c.yaml --yes" {
		t.Errorf("$F: got %q", texts(args, " "))
	}
}
