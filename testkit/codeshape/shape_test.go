package codeshape_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
)

// maxMethods bounds the method set of any production type: a type with
// more does more than one thing (issue 32's "types with one purpose").
const maxMethods = 20

// maxLines bounds a production function's length, its signature and
// closing brace included.
const maxLines = 80

// fakesOfExternalAPIs are let off maxMethods by name: each stands in for
// a whole API of another system (GitHub's REST API, Nomad's HTTP API, a
// repository on GitHub in memory), one handler per endpoint, and is as big
// as what it fakes. Nothing of the bot's own is on this list.
var fakesOfExternalAPIs = []string{
	"app/githubtest.Server",
	"dispatch/nomad/nomadtest.Server",
	"handlers/hub/hubtest.Repo",
}

const module = "github.com/sandbox-bot/sandbox-bot/"

// load type-checks every package of the module from source (unexported
// types are not in export data), without test files: tests are not
// production. It is read once for both tests.
var load = sync.OnceValues(func() ([]*packages.Package, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedImports, Dir: "../.."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		return nil, fmt.Errorf("%d packages did not type-check", n)
	}
	return pkgs, nil
})

// testSupport says whether a package only serves tests (its name ends in
// "test": githubtest, backendtest, receiptstest, hubtest, ...): such a
// package is not production code, so its functions may run long (a
// conformance suite is one long story), though its types are counted.
func testSupport(p *packages.Package) bool {
	return strings.HasSuffix(p.Name, "test")
}

// TestNoTypeDoesEverything counts the method set of every named type of
// every package, as a pointer, promoted methods of embedded types
// included (embedding a big type is what makes a small one big), and
// fails for any type over maxMethods but a seam's adapter put together
// from small parts (see adapterOf) and the fakes of external APIs named
// above. -v lists every type over half the bound.
func TestNoTypeDoesEverything(t *testing.T) {
	pkgs, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 30 {
		t.Fatalf("loaded %d packages; the module has more", len(pkgs))
	}
	for _, p := range pkgs {
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			named, ok := tn.Type().(*types.Named)
			if !ok {
				continue
			}
			if _, isIface := named.Underlying().(*types.Interface); isIface {
				continue // an interface's methods are a seam, not a type's work
			}
			full := strings.TrimPrefix(p.PkgPath, module) + "." + name
			ms := types.NewMethodSet(types.NewPointer(named))
			if ms.Len() > maxMethods/2 {
				t.Logf("%-50s %3d methods (%d own)", full, ms.Len(), named.NumMethods())
			}
			if ms.Len() <= maxMethods || slices.Contains(fakesOfExternalAPIs, full) {
				continue
			}
			if seam := adapterOf(p.Types, named); seam != "" {
				t.Logf("%s is an adapter of %s put together from parts of at most %d methods each", full, seam, maxMethods)
				continue
			}
			var promoted []string
			for sel := range ms.Methods() {
				if len(sel.Index()) > 1 {
					promoted = append(promoted, sel.Obj().Name())
				}
			}
			t.Errorf("%s has %d methods (%d own, promoted: %s); at most %d: split it into parts, each doing one thing",
				full, ms.Len(), named.NumMethods(), strings.Join(promoted, ", "), maxMethods)
		}
	}
}

// adapterOf names the interfaces that named is an adapter of and nothing
// more, put together from small parts; "" when it is not. Such a type
// does one thing, the seams', and its size is theirs: docker.Backend is
// dispatch.Backend (and the optional interfaces callers look for) on one
// machine, one part per concern. The rule holds the composition to
// nothing of its own, so a big type cannot hide here by embedding pieces
// of itself:
//   - it declares no methods and every field is embedded (a part);
//   - each part's method set, as a pointer, is within maxMethods (the
//     parts are counted in their own right);
//   - each of its exported methods belongs to an interface it implements,
//     declared in its own package or in one its package imports: the
//     seams are the whole of what it offers (unexported helpers it has
//     are its parts').
func adapterOf(pkg *types.Package, named *types.Named) string {
	st, ok := named.Underlying().(*types.Struct)
	if !ok || st.NumFields() == 0 || named.NumMethods() > 0 {
		return ""
	}
	for f := range st.Fields() {
		part := f.Type()
		if p, ok := part.(*types.Pointer); ok {
			part = p.Elem()
		}
		if !f.Embedded() || types.NewMethodSet(types.NewPointer(part)).Len() > maxMethods {
			return ""
		}
	}
	ptr := types.NewPointer(named)
	var seams []*types.TypeName
	for _, scope := range append([]*types.Package{pkg}, pkg.Imports()...) {
		for _, name := range scope.Scope().Names() {
			tn, ok := scope.Scope().Lookup(name).(*types.TypeName)
			if !ok {
				continue
			}
			if iface, ok := tn.Type().Underlying().(*types.Interface); ok && iface.NumMethods() > 0 && types.Implements(ptr, iface) {
				seams = append(seams, tn)
			}
		}
	}
	used := map[string]bool{}
	for sel := range types.NewMethodSet(ptr).Methods() {
		m := sel.Obj()
		if !m.Exported() {
			continue
		}
		found := false
		for _, seam := range seams {
			if obj, _, _ := types.LookupFieldOrMethod(seam.Type(), false, m.Pkg(), m.Name()); obj != nil {
				found, used[seam.Pkg().Name()+"."+seam.Name()] = true, true
				break
			}
		}
		if !found {
			return ""
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range used {
			if !yield(n) {
				return
			}
		}
	})
	return strings.Join(names, ", ")
}

// TestOnlyAPureAdapterIsLetOff checks adapterOf's rule on small types: a
// composition that adds anything of its own, embeds a big part, or offers
// a method no interface of its package names, is counted like any other
// type.
func TestOnlyAPureAdapterIsLetOff(t *testing.T) {
	src := `package p
type Seam interface { A(); B() }
type a struct{}
func (*a) A() {}
type b struct{ n int }
func (*b) B() {}
func (*b) helper() {}
type c struct{}
func (*c) C() {}
type adapter struct{ a; *b }
type ownMethod struct{ a; b }
func (*ownMethod) D() {}
type ownField struct{ a; b; n int }
type moreThanTheSeam struct{ a; b; c }
type bigPart struct{ a; b; big }
type big struct{}
`
	for i := range maxMethods + 1 {
		src += fmt.Sprintf("func (*big) M%d() {}\n", i)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := new(types.Config).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"adapter": "p.Seam", "ownMethod": "", "ownField": "", "moreThanTheSeam": "", "bigPart": "", "a": "",
	} {
		if got := adapterOf(pkg, pkg.Scope().Lookup(name).Type().(*types.Named)); got != want {
			t.Errorf("adapterOf(%s) = %q, want %q", name, got, want)
		}
	}
}

// TestNoFunctionIsLong fails for any production function or method over
// maxLines lines. Test files and test-support packages (testSupport) are
// not production.
func TestNoFunctionIsLong(t *testing.T) {
	pkgs, err := load()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if testSupport(p) {
			continue
		}
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				start, end := p.Fset.Position(fd.Pos()), p.Fset.Position(fd.End())
				if n := end.Line - start.Line + 1; n > maxLines {
					t.Errorf("%s:%d: %s is %d lines; at most %d: take its steps out into functions named for what they do",
						strings.TrimPrefix(start.Filename, "../../"), start.Line, fd.Name.Name, n, maxLines)
				}
			}
		}
	}
}
