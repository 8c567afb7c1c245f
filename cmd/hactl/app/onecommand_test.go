package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneCommandPerFile enforces docs/architecture.md's "one cobra command per file": no non-test
// file of this package constructs more than one cobra.Command literal (a group's subcommands and
// the shared helpers live in files of their own).
func TestOneCommandPerFile(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		ast.Inspect(af, func(x ast.Node) bool {
			if cl, ok := x.(*ast.CompositeLit); ok && isCobraCommand(cl.Type) {
				n++
			}
			return true
		})
		if n > 1 {
			t.Errorf("%s constructs %d cobra.Command literals: one command per file (move the others into files of their own)", f, n)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no file checked")
	}
}

// isCobraCommand reports whether a composite literal's type is cobra.Command.
func isCobraCommand(e ast.Expr) bool {
	se, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := se.X.(*ast.Ident)
	return ok && id.Name == "cobra" && se.Sel.Name == "Command"
}
