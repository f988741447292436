package kconsist_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPublicSurface: producer, consumer and admin export only what users
// call. The constructors and cluster-following plumbing the factory needs
// go through this package (producer) or take a first parameter of a type
// of internal/link (consumer.New, admin.New), which code outside this
// module cannot name; one more exported would let users build a client
// without the factory's guarantee, and lead go doc with plumbing.
func TestPublicSurface(t *testing.T) {
	want := map[string][]string{
		"producer": {
			"Bytes",
			"ErrNotTransactional", "ErrSerialize",
			"GroupTransactSession", "GroupTransactSession.AllowRebalance", "GroupTransactSession.Begin",
			"GroupTransactSession.Close", "GroupTransactSession.End", "GroupTransactSession.Kgo",
			"GroupTransactSession.PollFetches", "GroupTransactSession.PollRecords", "GroupTransactSession.Produce",
			"GroupTransactSession.ProduceAsync", "GroupTransactSession.ProduceSync",
			"Header", "JSON", "New", "NewGroupTransactSession",
			"ProduceResult", "ProduceResults", "ProduceResults.FirstErr",
			"Producer", "Producer.BeginTransaction", "Producer.Close", "Producer.EndTransaction", "Producer.Flush",
			"Producer.Kgo", "Producer.Produce", "Producer.ProduceAsync", "Producer.ProduceSync",
			"Record", "Result", "Serializer", "SerializerFunc", "SerializerFunc.Serialize", "String",
			"TransactionEnd", "TryAbort", "TryCommit",
		},
		"consumer": {
			"Bytes",
			"Consumer", "Consumer.AllowRebalance", "Consumer.AppendPoll", "Consumer.Assign", "Consumer.Close",
			"Consumer.Commit", "Consumer.Kgo", "Consumer.PauseFetchPartitions", "Consumer.PauseFetchTopics",
			"Consumer.Poll", "Consumer.Records", "Consumer.ResumeFetchPartitions", "Consumer.ResumeFetchTopics",
			"Consumer.SetOffsets",
			"DeserializeError", "DeserializeError.Error", "DeserializeError.Unwrap",
			"Deserializer", "DeserializerFunc", "DeserializerFunc.Deserialize", "ErrDeserialize",
			"FetchError", "FetchError.Error", "FetchError.Unwrap",
			"Group", "Group.Commit", "Group.Kgo", "Header", "JSON", "New", "Record", "String",
		},
	}
	for pkg, names := range want {
		got := exported(t, "./"+pkg, false)
		slices.Sort(names)
		if !slices.Equal(got, names) {
			t.Errorf("%s exports\n\t%v\nwant\n\t%v", pkg, got, names)
		}
	}
	// The one constructor of each takes the factory's internal/link value
	// first: nothing outside this module can name its type, and a value of
	// it reached all the same (type inference, reflection) lacks the
	// factory's seal and is refused (each package's seal_test.go).
	for pkg, want := range map[string]string{"consumer": "Consumer", "admin": "Admin"} {
		if got := firstParam(t, "./"+pkg, "New"); got != "link."+want {
			t.Errorf("%s.New takes %q first, want link.%s (of internal/link)", pkg, got, want)
		}
	}
	// admin.Client has every kadm method: check the top level only.
	if got := exported(t, "./admin", true); !slices.Equal(got, []string{"Client", "New"}) {
		t.Errorf("admin exports %v at the top level, want [Client New]", got)
	}
}

// exported lists the exported names of the package in dir, methods as
// Type.Method unless topOnly, sorted.
func exported(t *testing.T, dir string, topOnly bool) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".go") || strings.HasSuffix(ent.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, ent.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", ent.Name(), err)
		}
		for _, d := range f.Decls {
			names = append(names, declNames(d, topOnly)...)
		}
	}
	slices.Sort(names)
	return names
}

// declNames lists the exported names d declares.
func declNames(d ast.Decl, topOnly bool) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		switch {
		case !d.Name.IsExported():
		case d.Recv == nil:
			names = append(names, d.Name.Name)
		case !topOnly:
			if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
				names = append(names, recv+"."+d.Name.Name)
			}
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// recvName is the type name of a method receiver: T, *T, *T[K, V].
func recvName(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// firstParam returns the type of the first parameter of the function name
// in the package in dir, as pkg.Type when pkg is internal/link imported
// under its own name, "" when there is no such function or parameter.
func firstParam(t *testing.T, dir, name string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".go") || strings.HasSuffix(ent.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, ent.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", ent.Name(), err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != name {
				continue
			}
			if fn.Type.Params.NumFields() == 0 {
				return ""
			}
			sel, ok := fn.Type.Params.List[0].Type.(*ast.SelectorExpr)
			if !ok {
				return fmt.Sprintf("%T", fn.Type.Params.List[0].Type)
			}
			pkg, _ := sel.X.(*ast.Ident)
			for _, imp := range f.Imports {
				if imp.Path.Value == `"github.com/kconsist/kconsist/internal/link"` && imp.Name == nil && pkg != nil && pkg.Name == "link" {
					return "link." + sel.Sel.Name
				}
			}
			return fmt.Sprintf("%v.%s", sel.X, sel.Sel.Name)
		}
	}
	return ""
}

// TestFactoryOnlyConstructors: every exported function of producer that
// returns one of its clients takes, first, a value (not a pointer, not an
// interface) of a type from internal/link. Code outside this module cannot
// name such a type, and a value of it reached all the same (the zero
// value by type inference, one filled by reflection) lacks the factory's
// seal (link.Seal) and is refused (producer/seal_test.go): producers come
// from the factory only.
func TestFactoryOnlyConstructors(t *testing.T) {
	const linkPath = `"github.com/kconsist/kconsist/internal/link"`
	clients := map[string]bool{"Producer": true, "GroupTransactSession": true}
	dir := "./producer"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".go") || strings.HasSuffix(ent.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, ent.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", ent.Name(), err)
		}
		linkName := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == linkPath {
				linkName = "link"
				if imp.Name != nil {
					linkName = imp.Name.Name
				}
			}
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || !returnsClient(fn, clients) {
				continue
			}
			found++
			params := fn.Type.Params.List
			var first ast.Expr
			if len(params) > 0 {
				first = params[0].Type
			}
			sel, ok := first.(*ast.SelectorExpr)
			if !ok || linkName == "" {
				t.Errorf("producer.%s returns a client but its first parameter is not a value of a type from internal/link", fn.Name.Name)
				continue
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != linkName {
				t.Errorf("producer.%s: first parameter of another package than internal/link", fn.Name.Name)
			}
		}
	}
	if found == 0 {
		t.Error("no constructor of producer found: the check checks nothing")
	}
}

// returnsClient reports whether fn returns one of the named types of its
// package, or a pointer to one.
func returnsClient(fn *ast.FuncDecl, clients map[string]bool) bool {
	if fn.Type.Results == nil {
		return false
	}
	for _, r := range fn.Type.Results.List {
		x := r.Type
		if s, ok := x.(*ast.StarExpr); ok {
			x = s.X
		}
		if clients[recvName(x)] {
			return true
		}
	}
	return false
}
