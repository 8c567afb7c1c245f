// Package docs holds the project's design documents; its test keeps docs/architecture.md true.
package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/hactl/hactl"

// pkg is what `go list -json` says of one package of the root module.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
	GoFiles    []string
}

// listPackages runs `go list -deps`-style listing of every package of the root module (without test
// files and build tags: what ships).
func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	listOnce.Do(func() { listed, listErr = goList() })
	if listErr != nil {
		t.Fatal(listErr)
	}
	return listed
}

// listOnce runs goList once for every test of the package (each would otherwise run go list).
var (
	listOnce sync.Once
	listed   map[string]pkg
	listErr  error
)

// goList is listPackages' one `go list` run. Errors: go list's (with its stderr), the JSON's.
func goList() (map[string]pkg, error) {
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps,GoFiles", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		if len(p.GoFiles) == 0 {
			continue // test-only packages (the e2e suites, this one)
		}
		pkgs[rel(p.ImportPath)] = p
	}
	return pkgs, nil
}

// rel strips the module path; "" for packages outside the module.
func rel(path string) string {
	if path == module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return ""
}

// ours returns the module's packages among paths, relative and sorted.
func ours(paths []string) []string {
	var out []string
	for _, p := range paths {
		if r := rel(p); r != "" {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// docRow is one row of the architecture page's package table.
type docRow struct {
	line    int
	imports []string
}

var (
	rowRE  = regexp.MustCompile("^\\| `([a-z0-9/._-]+)` \\|")
	codeRE = regexp.MustCompile("`([a-z0-9/._-]+)`")
)

// readTable reads the package table of architecture.md (the section "## Packages"): rows
// "| `pkg` | owns | `imp` `imp` |" (the last column lists the module packages the package imports;
// "-" for none).
func readTable(t *testing.T) map[string]docRow {
	t.Helper()
	f, err := os.Open("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]docRow{}
	sc := bufio.NewScanner(f)
	n := 0
	in := false
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages"
			continue
		}
		m := rowRE.FindStringSubmatch(line)
		if !in {
			continue
		}
		if m == nil {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("architecture.md:%d: a package row needs three columns: %s", n, line)
		}
		var imports []string
		for _, c := range codeRE.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			imports = append(imports, c[1])
		}
		sort.Strings(imports)
		if _, dup := rows[m[1]]; dup {
			t.Errorf("architecture.md:%d: %s has two rows", n, m[1])
		}
		rows[m[1]] = docRow{line: n, imports: imports}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("architecture.md has no package rows under \"## Packages\"")
	}
	return rows
}

// TestArchitectureTable: every package of the root module has a row in docs/architecture.md, every
// row names a package that exists, and each row's import column is exactly the module packages the
// package imports (go list). On a mismatch the failure prints the row as it should read.
func TestArchitectureTable(t *testing.T) {
	pkgs := listPackages(t)
	rows := readTable(t)
	for name, p := range pkgs {
		want := ours(p.Imports)
		row, ok := rows[name]
		if !ok {
			t.Errorf("architecture.md has no row for %s; add: | `%s` | <what it owns> | %s |", name, name, cell(want))
			continue
		}
		if !slices.Equal(row.imports, want) {
			t.Errorf("architecture.md:%d: %s imports %s, the page says %s", row.line, name, cell(want), cell(row.imports))
		}
	}
	for name, row := range rows {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("architecture.md:%d: %s is not a package of the module (moved or removed?)", row.line, name)
		}
	}
}

func cell(imports []string) string {
	if len(imports) == 0 {
		return "-"
	}
	q := make([]string, len(imports))
	for i, s := range imports {
		q[i] = "`" + s + "`"
	}
	return strings.Join(q, " ")
}

// TestArchitectureRules checks the rules the page states about which way imports go, on the
// transitive dependencies (go list -deps).
func TestArchitectureRules(t *testing.T) {
	pkgs := listPackages(t)
	deps := func(name string) []string { return ours(pkgs[name].Deps) }
	importers := func(target string) []string {
		var out []string
		for name, p := range pkgs {
			if slices.Contains(ours(p.Imports), target) {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out
	}
	for name := range pkgs {
		if strings.HasPrefix(name, "api/") {
			// The spec: nothing of hactl but its own constants.
			for _, d := range deps(name) {
				if d != "api/limits" {
					t.Errorf("%s depends on %s: api/... may depend on api/limits only", name, d)
				}
			}
		}
		isTool := strings.HasPrefix(name, "e2e/") || strings.HasPrefix(name, "bench/") || strings.HasPrefix(name, "cmd/")
		if !isTool {
			for _, d := range deps(name) {
				if strings.HasPrefix(d, "e2e/") || strings.HasPrefix(d, "bench/") || strings.HasPrefix(d, "cmd/") {
					t.Errorf("%s depends on %s: product packages never depend on commands, the lab or benchmarks", name, d)
				}
			}
		}
	}
	if got := importers("bootstrap"); !slices.Equal(got, []string{"cmd/hactl/app"}) {
		t.Errorf("bootstrap is imported by %v; only the bootstrap command (cmd/hactl/app) may import it", got)
	}
	// provision is the transport: it knows the spec, not what is done with the hosts.
	for _, d := range deps("provision") {
		if !slices.Contains([]string{"api/v1alpha1", "api/limits", "internal/shell"}, d) {
			t.Errorf("provision depends on %s", d)
		}
	}
	// And within the command package, only the bootstrap command's file (bootstrap and plan).
	files, err := filepath.Glob("../cmd/hactl/app/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		fs := token.NewFileSet()
		af, err := parser.ParseFile(fs, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if imp.Path.Value == `"`+module+`/bootstrap"` && filepath.Base(f) != "bootstrap.go" {
				t.Errorf("%s imports bootstrap; only cmd/hactl/app/bootstrap.go may", f)
			}
		}
	}
}

// readLayers reads the numbered list of "## Which way imports go": item N is layer N, and every
// package named in backquotes in an item belongs to that layer. A package named in two items is an
// error (the prose must say where each package sits, once).
func readLayers(t *testing.T, pkgs map[string]pkg) (layer map[string]int, names map[int]string) {
	t.Helper()
	data, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	itemRE := regexp.MustCompile(`^(\d+)\. \*\*([^*]+)\*\*`)
	layer, names = map[string]int{}, map[int]string{}
	in, cur := false, 0
	for n, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## Which way imports go"
			cur = 0
			continue
		}
		if !in {
			continue
		}
		if m := itemRE.FindStringSubmatch(line); m != nil {
			cur++
			if m[1] != strconv.Itoa(cur) {
				t.Fatalf("architecture.md:%d: layer item %s out of order (want %d)", n+1, m[1], cur)
			}
			names[cur] = m[2]
		} else if !strings.HasPrefix(line, "   ") {
			cur = 0 // text outside the list
		}
		if cur == 0 {
			continue
		}
		for _, c := range codeRE.FindAllStringSubmatch(line, -1) {
			p := c[1]
			if _, ok := pkgs[p]; !ok {
				continue // a file, a phase or a pattern, not a package
			}
			if l, dup := layer[p]; dup && l != cur {
				t.Errorf("architecture.md:%d: %s is named in layer %d (%s) and layer %d (%s)", n+1, p, l, names[l], cur, names[cur])
			}
			layer[p] = cur
		}
	}
	if len(names) == 0 {
		t.Fatal(`architecture.md has no numbered layers under "## Which way imports go"`)
	}
	return layer, names
}

// TestArchitectureLayers keeps the layer prose true: every product package (all but the lab, the
// benchmarks and hack/) sits in exactly one layer, imports only packages of its own layer or below
// (nothing imports upwards), and the last layer's packages (the leaves) import no hactl package.
func TestArchitectureLayers(t *testing.T) {
	pkgs := listPackages(t)
	layer, names := readLayers(t, pkgs)
	last := len(names)
	for name, p := range pkgs {
		if strings.HasPrefix(name, "e2e/") || strings.HasPrefix(name, "bench/") || strings.HasPrefix(name, "hack/") {
			continue
		}
		l, ok := layer[name]
		if !ok {
			t.Errorf("%s is in no layer of architecture.md's \"Which way imports go\"; name it in the layer it belongs to", name)
			continue
		}
		for _, imp := range ours(p.Imports) {
			if li, ok := layer[imp]; ok && li < l {
				t.Errorf("%s (layer %d, %s) imports %s (layer %d, %s): an import upwards", name, l, names[l], imp, li, names[li])
			}
		}
		if l == last {
			if d := ours(p.Deps); len(d) > 0 {
				t.Errorf("%s is in layer %d (%s) but depends on %v", name, l, names[l], d)
			}
		}
	}
}
