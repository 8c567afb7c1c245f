package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Sizes that issue 36's "done means" holds the tree to.
const (
	// maxDrillFuncLines bounds every function and method of drill/... (its declaration's first to
	// last line, the doc comment excluded).
	maxDrillFuncLines = 120
	// maxMethods bounds the methods of any one type of the repository's modules (per receiver base
	// type, pointer and value receivers together, over the package's shipped files).
	maxMethods = 25
)

// otherModules are the repository's other Go modules (their own go.mod), whose shipped files
// TestMethodsPerType checks too.
var otherModules = []string{"scheduler", "cmd/hactl-operator"}

// parsedFile is one shipped (non-test) Go file of the root module, parsed.
type parsedFile struct {
	pkg  string // the package's path relative to the module, e.g. "drill/lease"
	fset *token.FileSet
	file *ast.File
}

// parseModule parses every file `go list` ships in the root module's packages (GoFiles: no test
// files, the build tags of this platform).
func parseModule(t *testing.T) []parsedFile {
	t.Helper()
	var out []parsedFile
	for rp, p := range listPackages(t) {
		fset := token.NewFileSet()
		for _, name := range p.GoFiles {
			path := filepath.Join("..", filepath.FromSlash(rp), name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, parsedFile{pkg: rp, fset: fset, file: f})
		}
	}
	return out
}

// parseOtherModules parses the non-test Go files of otherModules (every file, whatever its build
// tags; testdata skipped), each keyed by its directory relative to the repository.
func parseOtherModules(t *testing.T) []parsedFile {
	t.Helper()
	var out []parsedFile
	for _, m := range otherModules {
		err := filepath.WalkDir(filepath.Join("..", m), func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == "testdata":
				return filepath.SkipDir
			case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			out = append(out, parsedFile{pkg: filepath.ToSlash(strings.TrimPrefix(filepath.Dir(path), "../")), fset: fset, file: f})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// longFuncs lists the functions and methods of the packages under prefix longer than limit lines,
// as "file:line: name is N lines", sorted.
func longFuncs(files []parsedFile, prefix string, limit int) []string {
	var out []string
	for _, pf := range files {
		if pf.pkg != prefix && !strings.HasPrefix(pf.pkg, prefix+"/") {
			continue
		}
		for _, d := range pf.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := pf.fset.Position(fd.Pos()), pf.fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > limit {
				out = append(out, fmt.Sprintf("%s:%d: %s is %d lines", filepath.ToSlash(strings.TrimPrefix(start.Filename, "../")), start.Line, funcName(fd), n))
			}
		}
	}
	sort.Strings(out)
	return out
}

// funcName is "F" or "T.M".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return receiverType(fd.Recv.List[0].Type) + "." + fd.Name.Name
}

// receiverType is a receiver's base type name: T for T, *T, T[P] and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

// methodCounts counts the methods per type, keyed "package.Type" (package relative to the module).
func methodCounts(files []parsedFile) map[string]int {
	n := map[string]int{}
	for _, pf := range files {
		for _, d := range pf.file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) > 0 {
				n[pf.pkg+"."+receiverType(fd.Recv.List[0].Type)]++
			}
		}
	}
	return n
}

// bigTypes lists the types with more than limit methods as "pkg.Type: N methods", sorted.
func bigTypes(counts map[string]int, limit int) []string {
	var out []string
	for typ, n := range counts {
		if n > limit {
			out = append(out, fmt.Sprintf("%s: %d methods", typ, n))
		}
	}
	sort.Strings(out)
	return out
}

// TestDrillFunctionSize keeps every function of drill/... within maxDrillFuncLines lines (issue 36:
// split a longer one into named steps).
func TestDrillFunctionSize(t *testing.T) {
	for _, l := range longFuncs(parseModule(t), "drill", maxDrillFuncLines) {
		t.Errorf("%s (at most %d: split it into named steps)", l, maxDrillFuncLines)
	}
}

// TestMethodsPerType keeps every type of the repository's modules within maxMethods methods (issue
// 36: no god object).
func TestMethodsPerType(t *testing.T) {
	counts := methodCounts(append(parseModule(t), parseOtherModules(t)...))
	if counts["cmd/hactl-operator/internal/controller.EtcdClusterReconciler"] == 0 {
		t.Fatal("no methods counted in cmd/hactl-operator: is otherModules right?")
	}
	for _, l := range bigTypes(counts, maxMethods) {
		t.Errorf("%s (at most %d: give the type's parts their own types)", l, maxMethods)
	}
}
