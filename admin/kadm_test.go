package admin

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestKadmGenerated runs the generator (as go generate does) and fails
// when kadm.go is not what it makes: after a kadm upgrade or a hand edit.
func TestKadmGenerated(t *testing.T) {
	cmd := exec.Command("go", "run", "./internal/gen", "-o", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	require.NoError(t, err, "go run ./internal/gen: %s", stderr.String())
	have, err := os.ReadFile("kadm.go")
	require.NoError(t, err)
	if !bytes.Equal(have, want) {
		t.Errorf("kadm.go is not what admin/internal/gen makes: run go generate ./admin\n(first difference at byte %d)", firstDiff(have, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestEveryKadmMethod: every method of kadm.Client is on Client with the
// same signature (but Close, which takes a context and returns an error
// like every client's Close), so users lose nothing by not having a *kadm.Client, and a
// method a later kadm adds fails here until it is delegated (with fresh).
func TestEveryKadmMethod(t *testing.T) {
	kt, ct := reflect.TypeOf(&kadm.Client{}), reflect.TypeOf(&Client{})
	require.Positive(t, kt.NumMethod())
	for i := range kt.NumMethod() {
		km := kt.Method(i)
		cm, ok := ct.MethodByName(km.Name)
		if !ok {
			t.Errorf("kadm.Client.%s is not delegated by admin.Client (run go generate ./admin)", km.Name)
			continue
		}
		if km.Name == "Close" {
			// The one signature that differs: Close(ctx) error, the shape
			// of every client's Close.
			want := reflect.TypeOf(func(*Client, context.Context) error { return nil })
			if !sameSignature(want, cm.Type) {
				t.Errorf("admin.Client.Close is %v, want func(*admin.Client, context.Context) error", cm.Type)
			}
			continue
		}
		if !sameSignature(km.Type, cm.Type) {
			t.Errorf("admin.Client.%s is %v, kadm.Client.%s is %v", km.Name, cm.Type, km.Name, km.Type)
		}
	}
}

// sameSignature compares two method types without their receivers.
func sameSignature(a, b reflect.Type) bool {
	if a.NumIn() != b.NumIn() || a.NumOut() != b.NumOut() || a.IsVariadic() != b.IsVariadic() {
		return false
	}
	for i := 1; i < a.NumIn(); i++ {
		if a.In(i) != b.In(i) {
			return false
		}
	}
	for i := range a.NumOut() {
		if a.Out(i) != b.Out(i) {
			return false
		}
	}
	return true
}

// TestEveryMethodIsFresh reads this package's source: every method of
// Client that takes a context hands it to kadm only as fresh(ctx), and calls
// the kadm method of its own name. A method written without fresh would
// answer from franz-go's metadata cache for whichever kadm method reads
// metadata, today or after a kadm upgrade.
func TestEveryMethodIsFresh(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			// Close takes a context to bound closing, not for kadm.
			if !ok || !isClientMethod(fd) || fd.Name.Name == "Close" {
				continue
			}
			ctxName := contextParam(fd)
			if ctxName == "" {
				continue
			}
			checked++
			checkFresh(t, fset, fd, ctxName)
		}
	}
	// Every kadm method but Close and SetTimeoutMillis takes a context.
	require.Equal(t, reflect.TypeOf(&kadm.Client{}).NumMethod()-2, checked)
}

func isClientMethod(fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) != 1 || !fd.Name.IsExported() {
		return false
	}
	st, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := st.X.(*ast.Ident)
	return ok && id.Name == "Client"
}

// contextParam returns the name of fd's context.Context parameter, or "".
func contextParam(fd *ast.FuncDecl) string {
	for _, p := range fd.Type.Params.List {
		sel, ok := p.Type.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Context" {
			continue
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "context" && len(p.Names) == 1 {
			return p.Names[0].Name
		}
	}
	return ""
}

func checkFresh(t *testing.T, fset *token.FileSet, fd *ast.FuncDecl, ctxName string) {
	t.Helper()
	pos := fset.Position(fd.Pos())
	var delegates bool
	freshArgs := map[*ast.Ident]bool{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if fn, ok := call.Fun.(*ast.Ident); ok && fn.Name == "fresh" && len(call.Args) == 1 {
			if arg, ok := call.Args[0].(*ast.Ident); ok {
				freshArgs[arg] = true
			}
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == fd.Name.Name {
			if inner, ok := sel.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "adm" && len(call.Args) > 0 {
				first, ok := call.Args[0].(*ast.CallExpr)
				if fn, isID := fnIdent(first, ok); isID && fn == "fresh" {
					delegates = true
				}
			}
		}
		return true
	})
	if !delegates {
		t.Errorf("%s: %s does not call c.adm.%s(fresh(%s), ...)", pos, fd.Name.Name, fd.Name.Name, ctxName)
	}
	// A run of the call (see retry.go) takes its context as a parameter
	// of the same name: declaring it is not a use.
	params := map[*ast.Ident]bool{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok {
			for _, f := range lit.Type.Params.List {
				for _, name := range f.Names {
					params[name] = true
				}
			}
		}
		return true
	})
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == ctxName && !freshArgs[id] && !params[id] {
			t.Errorf("%s: %s uses %s other than as fresh(%s)", fset.Position(id.Pos()), fd.Name.Name, ctxName, ctxName)
		}
		return true
	})
}

func fnIdent(call *ast.CallExpr, ok bool) (string, bool) {
	if !ok {
		return "", false
	}
	id, ok := call.Fun.(*ast.Ident)
	if !ok {
		return "", false
	}
	return id.Name, true
}

// TestCoordinatorMethodsRunAgain: the methods that send a request whose
// coordinator franz-go looks up without retrying the lookup (its sharded
// coordinator requests) run again through retry.go; the others are
// franz-go's alone, which retries every request of theirs, so running them
// again would spend its budget twice.
func TestCoordinatorMethodsRunAgain(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "kadm.go", nil, 0)
	require.NoError(t, err)
	runsAgain := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !isClientMethod(fd) {
			continue
		}
		runsAgain[fd.Name.Name] = false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok && strings.HasPrefix(id.Name, "retry") {
					runsAgain[fd.Name.Name] = true
				}
			}
			return true
		})
	}
	for _, name := range []string{"FetchOffsets", "FetchManyOffsets", "FetchOffsetsForTopics", "DescribeGroups",
		"DescribeConsumerGroups", "DeleteGroups", "DeleteGroup", "Lag", "DescribeTransactions", "DescribeShareGroups",
		"DescribeShareGroupOffsets"} {
		got, ok := runsAgain[name]
		require.True(t, ok, "kadm.go has no %s", name)
		require.True(t, got, "%s looks up a coordinator: it must run again (retry.go)", name)
	}
	// franz-go retries these lookups itself: an OffsetCommit's, an
	// OffsetDelete's, a LeaveGroup's (inside its retry loop), kadm's own
	// FindCoordinator (a request like any other).
	for _, name := range []string{"CreateTopic", "CreateTopics", "DeleteTopics", "ListTopics", "Metadata", "DeleteRecords",
		"AlterTopicConfigs", "ListGroups", "ListTransactions", "DescribeProducers", "ListEndOffsets", "CreateACLs",
		"CommitOffsets", "CommitAllOffsets", "DeleteOffsets", "LeaveGroup", "FindGroupCoordinators", "FindTxnCoordinators"} {
		got, ok := runsAgain[name]
		require.True(t, ok, "kadm.go has no %s", name)
		require.False(t, got, "%s looks up no coordinator: franz-go retries it within its budget", name)
	}
}
