package kconsist_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// factoryFiles parses the factory package's non-test source files.
func factoryFiles(t *testing.T) []*ast.File {
	t.Helper()
	names, err := filepath.Glob("factory/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// eventKinds returns the names of the factory.EventKind constants, read
// from the factory package's source.
func eventKinds(t *testing.T) []string {
	t.Helper()
	var kinds []string
	for _, d := range allDecls(factoryFiles(t)) {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		typed := false // iota constants after the first carry no type
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok {
				typed = id.Name == "EventKind"
			}
			if typed {
				for _, n := range vs.Names {
					kinds = append(kinds, n.Name)
				}
			}
		}
	}
	if len(kinds) < 9 {
		t.Fatalf("found %d EventKind constants in factory: %v", len(kinds), kinds)
	}
	return kinds
}

// TestReadmeListsEveryEvent: the README's events table has a row for every
// EventKind, so a new kind cannot go undocumented.
func TestReadmeListsEveryEvent(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range eventKinds(t) {
		if !strings.Contains(string(readme), "\n| `"+k+"` |") {
			t.Errorf("README.md's events table has no row for %s", k)
		}
	}
}

// TestWithObserverListsEveryEvent: factory.WithObserver's doc names every
// EventKind as a doc link.
func TestWithObserverListsEveryEvent(t *testing.T) {
	var doc string
	for _, d := range allDecls(factoryFiles(t)) {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "WithObserver" {
			doc = fd.Doc.Text()
		}
	}
	if doc == "" {
		t.Fatal("no doc comment on WithObserver in factory")
	}
	for _, k := range eventKinds(t) {
		if !strings.Contains(doc, "["+k+"]") {
			t.Errorf("WithObserver's doc does not name [%s]", k)
		}
	}
}

func allDecls(files []*ast.File) []ast.Decl {
	var decls []ast.Decl
	for _, f := range files {
		decls = append(decls, f.Decls...)
	}
	return decls
}
