// Package budgettest is the contract every budget.Ledger keeps: the
// memory and file books, Nomad's Variable, PostgreSQL and SQLite all run
// it.
package budgettest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// Opener gives two handles on one fresh ledger, as two replicas would
// hold it (the same handle twice where there is one process).
type Opener func(t *testing.T) (a, b budget.Ledger)

// Run runs the contract on ledgers open makes.
func Run(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, a, b budget.Ledger)
	}{
		{"fits, trims to the rest, refuses below the floor", fitsTrimsRefuses},
		{"repository and installation budgets", scopes},
		{"a task reserves once", reservesOnce},
		{"settles once to the real cost", settlesOnce},
		{"unknown cost counts by its budget", unknownCost},
		{"release gives back a run that never started", releases},
		{"months are apart", months},
		{"two replicas cannot both take the last dollars", race},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := open(t)
			c.fn(t, a, b)
		})
	}
}

const month = "2026-11"

func req(task string, amount float64) budget.Request {
	return budget.Request{TaskID: task, InstallationID: 7, Repo: "Acme/Web", Month: month, AmountUSD: amount, InstallationUSD: 10, FloorUSD: 1}
}

func reserve(t *testing.T, l budget.Ledger, r budget.Request) budget.Grant {
	t.Helper()
	g, err := l.Reserve(context.Background(), r)
	if err != nil {
		t.Fatalf("Reserve(%s, $%.2f): %v", r.TaskID, r.AmountUSD, err)
	}
	return g
}

func totals(t *testing.T, l budget.Ledger, repo string) (budget.Totals, budget.Totals) {
	t.Helper()
	it, rt, err := l.Totals(context.Background(), 7, repo, month)
	if err != nil {
		t.Fatal(err)
	}
	return it, rt
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func fitsTrimsRefuses(t *testing.T, a, b budget.Ledger) {
	if g := reserve(t, a, req("T-1", 4)); !near(g.AmountUSD, 4) || g.Trimmed {
		t.Errorf("a run that fits got %+v, want its own $4", g)
	}
	if g := reserve(t, b, req("T-2", 4)); !near(g.AmountUSD, 4) {
		t.Errorf("second run got %+v", g)
	}
	if g := reserve(t, a, req("T-3", 4)); !near(g.AmountUSD, 2) || !g.Trimmed {
		t.Errorf("a run over the budget with $2 left (floor $1) got %+v, want the $2 left, trimmed", g)
	}
	_, err := b.Reserve(context.Background(), req("T-4", 4))
	var over *budget.OverBudget
	if !errors.As(err, &over) || !errors.Is(err, budget.ErrOverBudget) {
		t.Fatalf("a run with nothing left: err %v, want *OverBudget", err)
	}
	if over.Scope != "installation" || !near(over.BudgetUSD, 10) || !near(over.Totals.ReservedUSD, 10) || !near(over.LeftUSD, 0) {
		t.Errorf("refusal %+v does not name the installation's $10, all of it reserved", over)
	}
	it, _ := totals(t, b, "acme/web")
	if !near(it.ReservedUSD, 10) || it.SpentUSD != 0 {
		t.Errorf("totals %+v, want $10 reserved, nothing spent", it)
	}
}

func scopes(t *testing.T, a, b budget.Ledger) {
	r := req("T-1", 3)
	r.RepoUSD = 4
	reserve(t, a, r)
	r2 := req("T-2", 3)
	r2.RepoUSD, r2.FloorUSD = 4, 2
	_, err := b.Reserve(context.Background(), r2)
	var over *budget.OverBudget
	if !errors.As(err, &over) || over.Scope != "repository" || !near(over.LeftUSD, 1) || !near(over.BudgetUSD, 4) {
		t.Fatalf("a second $3 run on a $4 repository ($1 left, floor $2): err %v, want the repository's refusal with $1 left", err)
	}
	other := req("T-3", 3)
	other.Repo, other.RepoUSD = "acme/api", 4
	if g := reserve(t, b, other); !near(g.AmountUSD, 3) {
		t.Errorf("another repository's run got %+v, want $3 (its own budget is untouched)", g)
	}
	it, rt := totals(t, a, "ACME/WEB")
	if !near(it.ReservedUSD, 6) || !near(rt.ReservedUSD, 3) {
		t.Errorf("installation %+v repository %+v, want $6 and $3 reserved", it, rt)
	}
}

func reservesOnce(t *testing.T, a, b budget.Ledger) {
	first := reserve(t, a, req("T-1", 4))
	again := reserve(t, b, req("T-1", 4))
	if !again.Existing || !near(again.AmountUSD, first.AmountUSD) {
		t.Errorf("a redelivered reserve got %+v, want the first grant %+v again", again, first)
	}
	if it, _ := totals(t, a, "acme/web"); !near(it.ReservedUSD, 4) {
		t.Errorf("reserved $%.2f after reserving one task twice, want $4", it.ReservedUSD)
	}
}

func settlesOnce(t *testing.T, a, b budget.Ledger) {
	ctx := context.Background()
	reserve(t, a, req("T-1", 4))
	if err := a.Settle(ctx, "T-1", 1.25, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Settle(ctx, "T-1", 3.5, true); err != nil {
		t.Fatal(err)
	}
	it, rt := totals(t, b, "acme/web")
	if !near(it.SpentUSD, 1.25) || it.ReservedUSD != 0 || !near(rt.SpentUSD, 1.25) {
		t.Errorf("after two settles: %+v / %+v, want $1.25 spent once, nothing reserved", it, rt)
	}
	if err := a.Release(ctx, "T-1"); err != nil {
		t.Fatal(err)
	}
	if it, _ := totals(t, a, "acme/web"); !near(it.SpentUSD, 1.25) {
		t.Errorf("a release after the settle changed the spend to $%.2f", it.SpentUSD)
	}
	if err := a.Settle(ctx, "T-unknown", 2, true); err != nil {
		t.Errorf("settling a task that reserved nothing: %v", err)
	}
}

func unknownCost(t *testing.T, a, b budget.Ledger) {
	reserve(t, a, req("T-1", 4))
	if err := b.Settle(context.Background(), "T-1", 0, false); err != nil {
		t.Fatal(err)
	}
	it, _ := totals(t, a, "acme/web")
	if !near(it.SpentUSD, 4) || it.Unknown != 1 {
		t.Errorf("a run of unknown cost: %+v, want its $4 budget spent and one unknown", it)
	}
}

func releases(t *testing.T, a, b budget.Ledger) {
	reserve(t, a, req("T-1", 10))
	if err := b.Release(context.Background(), "T-1"); err != nil {
		t.Fatal(err)
	}
	if g := reserve(t, a, req("T-2", 10)); !near(g.AmountUSD, 10) {
		t.Errorf("after a release, a run got %+v, want the whole $10", g)
	}
	// A released task that is started again (a redelivered event after a
	// failed submission) reserves afresh: it is refused now, not let
	// through on its old grant.
	if _, err := b.Reserve(context.Background(), req("T-1", 10)); !errors.Is(err, budget.ErrOverBudget) {
		t.Errorf("the released task reserving again with nothing left: %v, want a refusal", err)
	}
}

func months(t *testing.T, a, b budget.Ledger) {
	reserve(t, a, req("T-1", 10))
	next := req("T-2", 10)
	next.Month = "2026-12"
	if g := reserve(t, b, next); !near(g.AmountUSD, 10) {
		t.Errorf("a new month's run got %+v, want $10", g)
	}
}

// race has two replicas' handles reserve $1 runs at once against $10:
// exactly ten are admitted, and the reservations never pass the budget.
func race(t *testing.T, a, b budget.Ledger) {
	const n = 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			r := req(fmt.Sprintf("T-%02d", i), 1)
			r.FloorUSD = 1
			g, err := l.Reserve(context.Background(), r)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && near(g.AmountUSD, 1):
				granted++
			case errors.Is(err, budget.ErrOverBudget):
				refused++
			default:
				t.Errorf("reserve %d: grant %+v err %v", i, g, err)
			}
		}()
	}
	wg.Wait()
	if granted != 10 || refused != n-10 {
		t.Errorf("%d granted and %d refused of %d $1 runs on $10, want 10 and %d", granted, refused, n, n-10)
	}
	if it, _ := totals(t, a, "acme/web"); !near(it.ReservedUSD, 10) {
		t.Errorf("reserved $%.2f, want $10", it.ReservedUSD)
	}
}
