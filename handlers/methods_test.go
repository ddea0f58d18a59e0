package handlers_test

import (
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

// overToday are the types still over maxMethods, with their count when
// this test was written: each may shrink, none may grow, and no other
// type may pass maxMethods. Base is the event router (who may act, CI,
// replies, the table's actions); goRepo is the go-github side of the
// GitHub seam, one method per call of the interface. The webhook handlers
// hold the router and do not embed it, so each has its two methods.
var overToday = map[string]int{
	"*Base": 62, "*goRepo": 39,
}

// TestNoTypeDoesEverything counts the method set of every named type of
// the package as a pointer, promoted methods of embedded types included
// (embedding a big type is what makes a small one big), and fails for any
// type over maxMethods. -v lists every type's count, largest first. It
// reads the package's imports through go list: a second or two.
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
		name     string
		all, own int
		promoted []string
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
		c := count{name: "*" + name, all: ms.Len(), own: named.NumMethods()}
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
		if limit, ok := overToday[c.name]; ok && c.all <= limit {
			if c.all > maxMethods {
				t.Logf("%s is still over %d (issue 32)", c.name, maxMethods)
			}
			continue
		}
		if c.all > maxMethods {
			t.Errorf("%s has %d methods (%d own, promoted: %s); at most %d: split it by the part of a run's life each part owns",
				c.name, c.all, c.own, strings.Join(c.promoted, ", "), maxMethods)
		}
	}
}
