// Package budget keeps the monthly budgets of installations and
// repositories: a run reserves its own budget before it is submitted
// (Reserve, checked and set against both monthly budgets, so two replicas
// admitting at once cannot both take the last dollars), settles to its
// real cost when its result is read (Settle, once), and gives its
// reservation back when it never started (Release).
//
// Two kinds of ledger answer to one contract (budgettest): the shared
// receipts database (app/receipts: PostgreSQL with a transaction lock,
// SQLite under its write lock) when SANDBOX_DATABASE_URL is set, and
// otherwise a Book kept by the backend beside its lock and queue (the
// docker and process backends' flock'd file, Nomad Variables with
// check-and-set, the memory backend) under BookLedger.
package budget

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Policy is the server's budgets, resolved: 0 is no budget.
type Policy struct {
	InstallationUSD float64
	RepoUSD         float64
	// FloorUSD is the least a run is given: a run whose own budget does
	// not fit what is left is given what is left when that is at least
	// the floor, and refused otherwise.
	FloorUSD float64
	// Location is where months begin (UTC unless configured).
	Location *time.Location
}

// Any reports whether a budget is set.
func (p Policy) Any() bool { return p.InstallationUSD > 0 || p.RepoUSD > 0 }

// Month is the month of t in the policy's time zone ("2026-11").
func (p Policy) Month(t time.Time) string { return t.In(p.loc()).Format("2006-01") }

// Resets is when the month of t ends.
func (p Policy) Resets(t time.Time) time.Time {
	l := t.In(p.loc())
	return time.Date(l.Year(), l.Month()+1, 1, 0, 0, 0, 0, p.loc())
}

func (p Policy) loc() *time.Location {
	if p.Location == nil {
		return time.UTC
	}
	return p.Location
}

// Request is one run's ask.
type Request struct {
	TaskID         string
	InstallationID int64
	// Repo is owner/name; the ledger compares it case-insensitively.
	Repo  string
	Month string
	// AmountUSD is the run's own budget.
	AmountUSD float64
	// InstallationUSD, RepoUSD and FloorUSD are the budgets that apply to
	// this run (the server's, lowered by its configuration).
	InstallationUSD, RepoUSD, FloorUSD float64
}

// Grant is what a reservation gave the run.
type Grant struct {
	// AmountUSD is the run's budget now: its own, or what was left of the
	// month when that was less (Trimmed).
	AmountUSD float64
	Trimmed   bool
	// Existing: the task had reserved already (a redelivered event); the
	// grant is the one it got then.
	Existing bool
}

// Totals are a month's figures of one installation or repository.
type Totals struct {
	// SpentUSD is what settled runs cost (a run of unknown cost counts by
	// its budget); ReservedUSD is what the runs in flight reserved.
	SpentUSD    float64
	ReservedUSD float64
	// Unknown counts settled runs whose cost nobody reported.
	Unknown int
}

// Used is what counts against the budget.
func (t Totals) Used() float64 { return t.SpentUSD + t.ReservedUSD }

// OverBudget is a run refused because its budget did not fit.
type OverBudget struct {
	// Scope is "installation" or "repository": the budget that refused.
	Scope     string
	BudgetUSD float64
	Totals    Totals
	// AskedUSD is the run's own budget; LeftUSD is what was left of the
	// month, below the floor.
	AskedUSD, LeftUSD, FloorUSD float64
}

func (e *OverBudget) Error() string {
	return fmt.Sprintf("over the %s's monthly budget of $%.2f: $%.2f spent and $%.2f reserved this month leave $%.2f, less than the run's $%.2f and the floor of $%.2f",
		e.Scope, e.BudgetUSD, e.Totals.SpentUSD, e.Totals.ReservedUSD, e.LeftUSD, e.AskedUSD, e.FloorUSD)
}

// ErrOverBudget matches every *OverBudget (errors.Is).
var ErrOverBudget = errors.New("over budget")

// Is makes errors.Is(err, ErrOverBudget) hold.
func (e *OverBudget) Is(target error) bool { return target == ErrOverBudget }

// Ledger is where reservations and settlements are kept, where every
// replica sees them.
type Ledger interface {
	// Reserve checks and sets, in one step, that the month's spend plus
	// what is reserved plus this run's budget fits both budgets; it
	// returns the grant, or an *OverBudget. A task that reserved already
	// gets its grant again.
	Reserve(ctx context.Context, r Request) (Grant, error)
	// Settle sets a reserved run's cost: costUSD when known, its grant
	// otherwise. A second settle of the same task changes nothing; a task
	// that reserved nothing is no error.
	Settle(ctx context.Context, taskID string, costUSD float64, known bool) error
	// Release gives back the reservation of a run that never started.
	Release(ctx context.Context, taskID string) error
	// Totals are the month's figures of the installation and of repo.
	Totals(ctx context.Context, installationID int64, repo, month string) (inst, repoT Totals, err error)
}

// Decide is the one admission rule, which every ledger applies to the
// totals it read under its lock: the run's own budget when it fits both
// budgets, else what is left when that is at least the floor, else an
// *OverBudget naming the budget that refused.
func Decide(r Request, inst, repo Totals) (Grant, error) {
	amount, trimmed := r.AmountUSD, false
	for _, b := range []struct {
		scope  string
		budget float64
		t      Totals
	}{{"installation", r.InstallationUSD, inst}, {"repository", r.RepoUSD, repo}} {
		if b.budget <= 0 {
			continue
		}
		left := cents(b.budget - b.t.Used())
		if amount <= left {
			continue
		}
		if left <= 0 || left < r.FloorUSD || left <= 0.005 {
			return Grant{}, &OverBudget{Scope: b.scope, BudgetUSD: b.budget, Totals: b.t, AskedUSD: r.AmountUSD, LeftUSD: max(left, 0), FloorUSD: r.FloorUSD}
		}
		amount, trimmed = left, true
	}
	return Grant{AmountUSD: amount, Trimmed: trimmed}, nil
}

// cents rounds down to the cent, so float sums never admit a run by a
// fraction of a cent.
func cents(v float64) float64 {
	return float64(int64(v*100+1e-6)) / 100
}

// RepoKey is how ledgers compare repositories (GitHub names are
// case-insensitive).
func RepoKey(repo string) string { return strings.ToLower(repo) }
