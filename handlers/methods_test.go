package handlers_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// maxMethods bounds the method set of any type of the package: a type
// with more does more than one thing (issue 32's "types with one
// purpose").
const maxMethods = 20

// TestNoTypeDoesEverything counts the method set of every named type of
// the package as a pointer, promoted methods of embedded types included
// (embedding a big type is what makes a small one big), and fails for any
// type over maxMethods but a seam's adapter put together from small parts
// (see adapterOf). -v lists every type's count, largest first. It reads
// the package's imports through go list: a second or two.
func TestNoTypeDoesEverything(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax, Dir: "."}
	pkgs, err := packages.Load(cfg, ".")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 || len(pkgs) != 1 {
		t.Fatalf("the package did not type-check (%d packages)", len(pkgs))
	}
	type count struct {
		name      string
		all, own  int
		promoted  []string
		adapterOf string
	}
	var counts []count
	scope := pkgs[0].Types.Scope()
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
		ms := types.NewMethodSet(types.NewPointer(named))
		c := count{name: "*" + name, all: ms.Len(), own: named.NumMethods(), adapterOf: adapterOf(scope, named)}
		for sel := range ms.Methods() {
			if len(sel.Index()) > 1 {
				c.promoted = append(c.promoted, sel.Obj().Name())
			}
		}
		counts = append(counts, c)
	}
	slices.SortFunc(counts, func(a, b count) int { return b.all - a.all })
	for _, c := range counts {
		if c.all == 0 {
			continue
		}
		t.Logf("%-28s %3d methods (%d own)", c.name, c.all, c.own)
		if c.adapterOf != "" {
			t.Logf("%s is %s's adapter put together from parts of at most %d methods each", c.name, c.adapterOf, maxMethods)
			continue
		}
		if c.all > maxMethods {
			t.Errorf("%s has %d methods (%d own, promoted: %s); at most %d: split it by the part of a run's life each part owns",
				c.name, c.all, c.own, strings.Join(c.promoted, ", "), maxMethods)
		}
	}
}

// adapterOf names the interface of the package that named is an adapter
// of and nothing more, put together from small parts; "" when it is not.
// Such a type does one thing, the seam's, and its size is the seam's:
// goRepo is GitHub over go-github, one part per interface GitHub is made
// of (Conversation, People, ...), where the calls are. The rule holds
// the composition to nothing of its own, so a big type cannot hide here
// by embedding pieces of itself:
//   - it declares no methods and every field is embedded (a part);
//   - each part's method set, as a pointer, is within maxMethods (the
//     parts are counted above in their own right);
//   - it implements an interface I declared in the package, and each of
//     its exported methods is one of I's: the seam is the whole of what
//     it offers (unexported helpers it has are its parts').
func adapterOf(scope *types.Scope, named *types.Named) string {
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
	for _, name := range scope.Names() {
		iface, ok := scope.Lookup(name).Type().Underlying().(*types.Interface)
		if !ok || iface.NumMethods() == 0 || !types.Implements(ptr, iface) {
			continue
		}
		more := false
		for sel := range types.NewMethodSet(ptr).Methods() {
			if m := sel.Obj(); m.Exported() {
				if obj, _, _ := types.LookupFieldOrMethod(iface, false, m.Pkg(), m.Name()); obj == nil {
					more = true
				}
			}
		}
		if !more {
			return name
		}
	}
	return ""
}

// TestOnlyAPureAdapterIsLetOff checks adapterOf's rule on small types: a
// composition that adds anything of its own, or embeds a big part, is
// counted like any other type.
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
		"adapter": "Seam", "ownMethod": "", "ownField": "", "moreThanTheSeam": "", "bigPart": "", "a": "",
	} {
		if got := adapterOf(pkg.Scope(), pkg.Scope().Lookup(name).Type().(*types.Named)); got != want {
			t.Errorf("adapterOf(%s) = %q, want %q", name, got, want)
		}
	}
}
