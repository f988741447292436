// Command gen writes admin/kadm.go: one method on admin.Client for every
// method of kadm.Client that takes a context, each handing kadm fresh(ctx)
// (see the admin package doc for why). It reads kadm's method set with
// go/types from the export data of the kadm version the module requires
// (`go list -export`), so a kadm upgrade that adds a method adds it here on
// the next `go generate ./admin`, and TestKadmGenerated in package admin
// fails until the checked-in file is regenerated.
//
// Run from the admin directory (go generate does):
//
//	go run ./internal/gen [-o kadm.go]
//
// "-o -" writes to standard output. The output is the same bytes on every
// run for the same kadm version.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

const kadmPath = "github.com/twmb/franz-go/pkg/kadm"

// excluded lists the methods of kadm.Client that are not generated, each
// with the reason; admin.go writes them by hand. Any other kadm method that
// does not take a context as its first parameter stops the generator, so a
// new one is looked at instead of being skipped.
var excluded = map[string]string{
	// Closes the kgo client kadm wraps; admin.Client.Close closes the same
	// client, which admin.Client holds itself for Kgo.
	"Close": "no context; admin.go closes the client",
	// Sets a field on kadm's client, sends nothing, so there is no context
	// to make fresh.
	"SetTimeoutMillis": "no context; admin.go delegates it as is",
}

func main() {
	out := flag.String("o", "kadm.go", `file to write ("-" for standard output)`)
	flag.Parse()
	src, err := generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(src)
	} else {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// generate returns the formatted source of kadm.go for the kadm version
// the current module requires.
func generate() ([]byte, error) {
	k, err := goList()
	if err != nil {
		return nil, err
	}
	dep, err := deprecated(k.files)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := k.exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})
	pkg, err := imp.Import(kadmPath)
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", kadmPath, err)
	}
	obj, ok := pkg.Scope().Lookup("Client").(*types.TypeName)
	if !ok {
		return nil, fmt.Errorf("%s has no type Client", kadmPath)
	}
	reqs, err := shardedCoordinatorRequests(k.kgo)
	if err != nil {
		return nil, err
	}
	if err := checkSharded(reqs); err != nil {
		return nil, err
	}
	coord, err := coordinated(k.files, reqs)
	if err != nil {
		return nil, err
	}
	return render(k.version, types.NewMethodSet(types.NewPointer(obj.Type())), dep, excluded, coord)
}

const kgoPath = "github.com/twmb/franz-go/pkg/kgo"

// shardedCoordinatorRequests returns the names of the kmsg request types
// whose coordinator franz-go looks up without retrying the lookup, read
// from its source: the requests kgo.Client.handleShardedReq gives a
// sharder whose shard method loads coordinators (loadCoordinators). A
// failed lookup there fails the request's shard for good
// (noShardRetryCtx). The coordinator requests kgo issues one at a time
// (an OffsetCommit, a LeaveGroup) look theirs up inside its retry loop,
// and a FindCoordinator kadm sends itself is retried as any request: a
// kadm method that sends only those needs nothing from retry.go.
func shardedCoordinatorRequests(files []string) (map[string]bool, error) {
	bySharder := map[string][]string{}    // sharder type -> request types
	shards := map[string]string{}         // sharder type -> key of its shard method in calls
	calls := map[string]map[string]bool{} // function or method -> identifiers of its body
	found := false
	err := funcDecls(files, func(fd *ast.FuncDecl) {
		recv := receiverName(fd)
		self := fd.Name.Name
		if recv != "" {
			self = recv + "." + fd.Name.Name
		}
		if calls[self] == nil {
			calls[self] = map[string]bool{}
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				calls[self][id.Name] = true
			}
			return true
		})
		if fd.Name.Name == "shard" && recv != "" {
			shards[recv] = self
		}
		if recv != "Client" || fd.Name.Name != "handleShardedReq" {
			return
		}
		found = true
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			var reqs []string
			for _, e := range cc.List {
				if star, ok := e.(*ast.StarExpr); ok {
					if sel, ok := star.X.(*ast.SelectorExpr); ok {
						reqs = append(reqs, sel.Sel.Name)
					}
				}
			}
			for _, st := range cc.Body {
				ast.Inspect(st, func(n ast.Node) bool {
					if lit, ok := n.(*ast.CompositeLit); ok {
						if id, ok := lit.Type.(*ast.Ident); ok {
							bySharder[id.Name] = append(bySharder[id.Name], reqs...)
						}
					}
					return true
				})
			}
			return false
		})
	})
	if err != nil {
		return nil, err
	}
	// Which functions and methods may load coordinators: those that name
	// loadCoordinators, a plain function that does, or a method that does
	// of their own receiver's type, transitively. (Not every Client
	// method that reaches loadCoordinators: Client.Request does, through
	// every sharder, and each sharder would then seem to.)
	loads := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for fn, ids := range calls {
			if loads[fn] {
				continue
			}
			recv, _, _ := strings.Cut(fn, ".")
			if !strings.Contains(fn, ".") {
				recv = ""
			}
			for id := range ids {
				if id == "loadCoordinators" || loads[id] || (recv != "" && loads[recv+"."+id]) {
					loads[fn], changed = true, true
					break
				}
			}
		}
	}
	out := map[string]bool{}
	for sharder, reqs := range bySharder {
		if loads[shards[sharder]] {
			for _, r := range reqs {
				out[r] = true
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: no Client.handleShardedReq: teach the generator how franz-go shards requests now", kgoPath)
	}
	return out, nil
}

// knownSharded are the sharded coordinator requests of franz-go when the
// generator was written: one that no longer reads as such means the
// reading no longer sees what franz-go does (checkSharded).
var knownSharded = []string{"OffsetFetchRequest", "DescribeGroupsRequest", "DeleteGroupsRequest", "DescribeTransactionsRequest",
	"ConsumerGroupDescribeRequest", "ShareGroupDescribeRequest", "DescribeShareGroupOffsetsRequest"}

// checkSharded refuses a reading of franz-go's source that misses one of
// knownSharded.
func checkSharded(reqs map[string]bool) error {
	for _, name := range knownSharded {
		if !reqs[name] {
			return fmt.Errorf("%s: %s no longer reads as a sharded coordinator request: teach the generator how franz-go finds its coordinators now", kgoPath, name)
		}
	}
	return nil
}

// funcDecls parses files and calls fn with each function or method that
// has a body, in the files' order.
func funcDecls(files []string, fn func(*ast.FuncDecl)) error {
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				fn(fd)
			}
		}
	}
	return nil
}

// receiverName returns the name of fd's receiver type, T or *T, or "".
func receiverName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) != 1 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok { // a generic receiver
		t = idx.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// coordinated returns the names of kadm's functions and methods, in the
// source files given, that may look up a coordinator: those that make a
// request of reqs (kmsg.NewPtrXRequest, kmsg.NewXRequest, kmsg.XRequest)
// and those that name one of them anywhere in their body (a call, a
// method value, a function passed on; a name shared by a method of another
// type counts too: what the generator cannot tell apart is taken to look
// one up, so that it is run again rather than not).
func coordinated(files []string, reqs map[string]bool) (map[string]bool, error) {
	calls := map[string]map[string]bool{} // name -> names it calls
	out := map[string]bool{}
	err := funcDecls(files, func(fd *ast.FuncDecl) {
		self := fd.Name.Name
		if calls[self] == nil {
			calls[self] = map[string]bool{}
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "kmsg" {
					t := strings.TrimPrefix(strings.TrimPrefix(x.Sel.Name, "NewPtr"), "New")
					if reqs[t] {
						out[self] = true
					}
					return true
				}
			case *ast.Ident:
				calls[self][x.Name] = true
			}
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	for changed := true; changed; {
		changed = false
		for name, callees := range calls {
			if out[name] {
				continue
			}
			for c := range callees {
				if out[c] {
					out[name], changed = true, true
					break
				}
			}
		}
	}
	return out, nil
}

// kadmPkg is what go list says of kadm and its dependencies.
type kadmPkg struct {
	version string
	exports map[string]string // import path -> export data file
	files   []string          // kadm's Go files
	kgo     []string          // kgo's Go files
}

// goList returns the kadm version the module requires, the export data
// file of kadm and of every package it depends on, and kadm's source files.
func goList() (kadmPkg, error) {
	var k kadmPkg
	v, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", kadmPath).Output()
	if err != nil {
		return k, fmt.Errorf("go list -m %s: %w%s", kadmPath, err, stderr(err))
	}
	k.version = strings.TrimSpace(string(v))
	const format = `{{.ImportPath}}{{"\t"}}{{.Export}}{{"\t"}}{{.Dir}}{{range .GoFiles}}{{"\t"}}{{.}}{{end}}`
	deps, err := exec.Command("go", "list", "-export", "-deps", "-f", format, kadmPath).Output()
	if err != nil {
		return k, fmt.Errorf("go list -export %s: %w%s", kadmPath, err, stderr(err))
	}
	k.exports = map[string]string{}
	for line := range strings.Lines(string(deps)) {
		fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(fields) < 3 {
			return k, fmt.Errorf("go list -export %s: unexpected line %q", kadmPath, line)
		}
		if fields[1] != "" {
			k.exports[fields[0]] = fields[1]
		}
		if fields[0] == kadmPath {
			for _, f := range fields[3:] {
				k.files = append(k.files, filepath.Join(fields[2], f))
			}
		}
		if fields[0] == kgoPath {
			for _, f := range fields[3:] {
				k.kgo = append(k.kgo, filepath.Join(fields[2], f))
			}
		}
	}
	if len(k.files) == 0 {
		return k, fmt.Errorf("go list -export %s: no source files", kadmPath)
	}
	return k, nil
}

// deprecated returns the names of the methods of kadm.Client whose doc
// comment has a "Deprecated:" paragraph (export data carries no comments,
// so kadm's source is read for them).
func deprecated(files []string) (map[string]bool, error) {
	fset := token.NewFileSet()
	out := map[string]bool{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 || fd.Doc == nil {
				continue
			}
			star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if id, ok := star.X.(*ast.Ident); !ok || id.Name != "Client" {
				continue
			}
			for line := range strings.Lines(fd.Doc.Text()) {
				if strings.HasPrefix(line, "Deprecated: ") {
					out[fd.Name.Name] = true
				}
			}
		}
	}
	return out, nil
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

const header = `// Code generated by go run ./internal/gen; DO NOT EDIT.

package admin

`

const intro = `// Every method of kadm.Client that takes a context is delegated below, in
// kadm's order of names, and every one hands kadm fresh(ctx): kadm then
// never answers from franz-go's metadata cache, whichever of its methods
// reads metadata today or in a later version. Every call that may send a
// request whose coordinator franz-go looks up without retrying the lookup
// (read from kadm's and franz-go's source: a sharded coordinator request,
// or a call of what sends one) runs again while it failed because a
// broker was behind the token on a request franz-go does not retry
// (retry.go).
//
// Generated by admin/internal/gen (go generate ./admin) from the method
// set of kadm.Client in kadm %s; the methods it leaves out are listed
// there with the reason, and written by hand in admin.go.
// TestKadmGenerated fails when this file is not what the generator makes,
// TestEveryMethodIsFresh when a method here does not hand kadm fresh(ctx).

`

// render writes one delegating method per exported method of ms.
func render(version string, ms *types.MethodSet, deprecated map[string]bool, excluded map[string]string, coord map[string]bool) ([]byte, error) {
	imports := map[string]string{} // package name -> path
	var clash error
	qualify := func(p *types.Package) string {
		if have, ok := imports[p.Name()]; ok && have != p.Path() && clash == nil {
			clash = fmt.Errorf("packages %s and %s share the name %s", have, p.Path(), p.Name())
		}
		imports[p.Name()] = p.Path()
		return p.Name()
	}
	byName := map[string]*types.Func{}
	for sel := range ms.Methods() {
		if f := sel.Obj().(*types.Func); f.Exported() {
			byName[f.Name()] = f
		}
	}
	for name := range excluded {
		if byName[name] == nil {
			return nil, fmt.Errorf("excluded method kadm.Client.%s does not exist (any more): drop it from the list", name)
		}
	}
	var body bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if _, skip := excluded[name]; skip {
			continue
		}
		if err := method(&body, byName[name], deprecated[name], coord[name], qualify); err != nil {
			return nil, err
		}
	}
	if clash != nil {
		return nil, clash
	}

	var out bytes.Buffer
	out.WriteString(header)
	// The standard library first, then the rest, as goimports groups them.
	out.WriteString("import (\n")
	paths := slices.Sorted(maps.Values(imports))
	std := func(p string) bool { return !strings.Contains(strings.Split(p, "/")[0], ".") }
	for _, p := range paths {
		if std(p) {
			fmt.Fprintf(&out, "\t%q\n", p)
		}
	}
	out.WriteString("\n")
	for _, p := range paths {
		if !std(p) {
			fmt.Fprintf(&out, "\t%q\n", p)
		}
	}
	out.WriteString(")\n\n")
	fmt.Fprintf(&out, intro, version)
	out.Write(body.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated source: %w", err)
	}
	return src, nil
}

// method writes the delegation of f, a method of *kadm.Client whose first
// parameter must be a context.Context.
func method(w *bytes.Buffer, f *types.Func, deprecated, coord bool, qualify types.Qualifier) error {
	sig := f.Type().(*types.Signature)
	params := sig.Params()
	if params.Len() == 0 || !isContext(params.At(0).Type()) {
		return fmt.Errorf("kadm.Client.%s does not take a context first: delegate it by hand in admin.go and add it to the excluded list with the reason", f.Name())
	}
	// Parameters and named results keep kadm's names (they document the
	// signature), except the ones that would clash with what the body uses
	// (the receiver c, the function fresh) or that are blank or missing;
	// results are named all or none, as Go requires.
	results := sig.Results()
	used := map[string]bool{"c": true, "fresh": true, "retry": true, "retryErr": true, "retryEach": true}
	var names, resNames []string
	for v := range params.Variables() {
		names = append(names, v.Name())
	}
	for v := range results.Variables() {
		resNames = append(resNames, v.Name())
	}
	all := slices.Concat(names, resNames)
	rename := func(list []string, prefix string) {
		for i, n := range list {
			if n == "" || n == "_" || used[n] {
				n = fmt.Sprintf("%s%d", prefix, i)
				for used[n] || slices.Contains(all, n) {
					n += "_"
				}
			}
			list[i] = n
			used[n] = true
		}
	}
	rename(names, "arg")
	namedResults := results.Len() > 0 && results.At(0).Name() != ""
	if namedResults {
		rename(resNames, "res")
	}
	var in, args []string
	for i := range params.Len() {
		typ := types.TypeString(params.At(i).Type(), qualify)
		arg := names[i]
		if sig.Variadic() && i == params.Len()-1 {
			typ = "..." + types.TypeString(params.At(i).Type().(*types.Slice).Elem(), qualify)
			arg += "..."
		}
		if i == 0 {
			arg = "fresh(" + arg + ")"
		}
		in = append(in, names[i]+" "+typ)
		args = append(args, arg)
	}
	var outs []string
	for i := range results.Len() {
		typ := types.TypeString(results.At(i).Type(), qualify)
		if namedResults {
			typ = resNames[i] + " " + typ
		}
		outs = append(outs, typ)
	}
	result := strings.Join(outs, ", ")
	if len(outs) > 1 || namedResults {
		result = "(" + result + ")"
	}
	call := fmt.Sprintf("c.adm.%s(%s)", f.Name(), strings.Join(args, ", "))
	// A call that may look up a coordinator runs again while it failed
	// because a broker was behind the token on that lookup (see
	// retry.go): through retry when it returns a result and an error,
	// retryErr when only an error, retryEach when only a result whose
	// parts hold the errors. Each run takes the context retry gives it (a
	// run again ends with the retry budget's time), under the name of the
	// method's own context, which it shadows. Any other call is franz-go's
	// alone: it retries every request of it.
	var types_ []string
	for i := range results.Len() {
		types_ = append(types_, types.TypeString(results.At(i).Type(), qualify))
	}
	errLast := len(types_) > 0 && types_[len(types_)-1] == "error"
	switch {
	case len(types_) == 0: // nothing to judge a failure by
	case !coord:
		call = "return " + call
	case len(types_) == 2 && errLast:
		call = fmt.Sprintf("return retry(fresh(%[1]s), c, func(%[1]s context.Context) (%[2]s, error) { return %[3]s })", names[0], types_[0], call)
	case len(types_) == 1 && errLast:
		call = fmt.Sprintf("return retryErr(fresh(%[1]s), c, func(%[1]s context.Context) error { return %[2]s })", names[0], call)
	case len(types_) == 1:
		call = fmt.Sprintf("return retryEach(fresh(%[1]s), c, func(%[1]s context.Context) %[2]s { return %[3]s })", names[0], types_[0], call)
	default:
		return fmt.Errorf("kadm.Client.%s returns %v: teach the generator (and retry.go) how to run it again", f.Name(), types_)
	}
	fmt.Fprintf(w, "// %s is [kadm.Client.%s].\n", f.Name(), f.Name())
	if deprecated {
		w.WriteString("//\n// Deprecated: kadm deprecates it too.\n")
	}
	fmt.Fprintf(w, "func (c *Client) %[1]s(%[2]s) %[3]s {\n\t%[4]s\n}\n\n",
		f.Name(), strings.Join(in, ", "), result, call)
	return nil
}

func isContext(t types.Type) bool {
	n, ok := t.(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context" && n.Obj().Name() == "Context"
}
