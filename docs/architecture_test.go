// Package docs holds the project's design documents; its test keeps docs/architecture.md true.
package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
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
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps,GoFiles", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if len(p.GoFiles) == 0 {
			continue // test-only packages (the e2e suites, this one)
		}
		pkgs[rel(p.ImportPath)] = p
	}
	return pkgs
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

// leaves are the packages the page lists as importing no hactl package.
var leaves = []string{"api/limits", "report", "phase", "ui", "templates", "internal/shell", "internal/atomicfile",
	"internal/golden", "internal/exitcode", "internal/percentile"}

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
		switch {
		case strings.HasPrefix(name, "api/"):
			// The spec is a leaf: nothing of hactl but its own constants.
			for _, d := range deps(name) {
				if d != "api/limits" {
					t.Errorf("%s depends on %s: api/... may depend on api/limits only", name, d)
				}
			}
		case slices.Contains(leaves, name):
			if d := deps(name); len(d) > 0 {
				t.Errorf("%s is a leaf but depends on %v", name, d)
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
