package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
)

// budgetRow is one budget beside the usage: an installation's, or a
// repository's as its last admitted run had it (the server's, lowered by
// the organisation's and the repository's .sandbox.yml).
type budgetRow struct {
	Scope, Name                   string
	Budget, Spent, Reserved, Left string
	// Unknown counts the month's runs of unknown cost, which the budget
	// counts by their own budgets.
	Unknown int
	Note    string
}

// budgetRows are the month's budgets of the installations and
// repositories the page shows, from the ledger (what it counts against
// them: unknown costs by their budgets, runs in flight by their
// reservations). Nothing when budgets are off; a ledger that cannot be
// read is logged and leaves the row out.
func (d *dashboard) budgetRows(ctx context.Context, q usageQuery, out usageData) []budgetRow {
	u := d.budgets
	if u.ledger == nil {
		return nil
	}
	known := map[string]receipts.Limits{}
	if limits, err := d.store.Limits(ctx, out.Repos); err != nil {
		d.log.Warn().Err(err).Msg("usage: read the repositories' budgets")
	} else {
		for _, l := range limits {
			if l.UpdatedAt.After(known[l.Repo].UpdatedAt) {
				known[l.Repo] = l
			}
		}
	}
	repos := map[string]int64{}
	for _, r := range out.Rows {
		repos[r.Repo] = r.InstallationID
	}
	for _, name := range out.Repos {
		if l, ok := known[strings.ToLower(name)]; ok && (q.Repo == "" || strings.EqualFold(q.Repo, name)) {
			repos[name] = l.InstallationID
		}
	}
	insts := map[int64]bool{}
	for _, id := range repos {
		insts[id] = true
	}
	var rows []budgetRow
	if u.policy.InstallationUSD > 0 {
		for _, id := range slices.Sorted(maps.Keys(insts)) {
			if row, ok := d.budgetRow(ctx, "installation", fmt.Sprint(id), u.policy.InstallationUSD, id, "", q.Month); ok {
				rows = append(rows, row)
			}
		}
	}
	names := make([]string, 0, len(repos))
	for name := range repos {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if row, ok := d.repoBudget(ctx, name, repos[name], known[strings.ToLower(name)], q.Month); ok {
			rows = append(rows, row)
		}
	}
	return rows
}

// repoBudget is a repository's row: its budget as last admitted (the
// server's when no run was admitted yet), and a note when its runs met a
// lower installation budget than the server's.
func (d *dashboard) repoBudget(ctx context.Context, name string, inst int64, l receipts.Limits, month string) (budgetRow, bool) {
	p := d.budgets.policy
	b, note := p.RepoUSD, ""
	if !l.UpdatedAt.IsZero() {
		b = l.RepoUSD
		if b != p.RepoUSD {
			note = fmt.Sprintf("lowered by .sandbox.yml (server: %s)", dollars(p.RepoUSD))
		}
		if l.InstallationUSD > 0 && l.InstallationUSD != p.InstallationUSD {
			note = strings.TrimPrefix(note+"; ", "; ") + "its runs' installation budget: " + dollars(l.InstallationUSD)
		}
	}
	if b <= 0 {
		return budgetRow{}, false
	}
	row, ok := d.budgetRow(ctx, "repository", name, b, inst, name, month)
	row.Note = note
	return row, ok
}

func (d *dashboard) budgetRow(ctx context.Context, scope, name string, limit float64, inst int64, repo, month string) (budgetRow, bool) {
	it, rt, err := d.budgets.ledger.Totals(ctx, inst, repo, month)
	if err != nil {
		d.log.Warn().Err(err).Int64("installation", inst).Str("repo", repo).Msg("usage: read the month's budget figures")
		return budgetRow{}, false
	}
	t := it
	if repo != "" {
		t = rt
	}
	return budgetRow{Scope: scope, Name: name, Budget: dollars(limit), Spent: fmt.Sprintf("$%.2f", t.SpentUSD), Reserved: fmt.Sprintf("$%.2f", t.ReservedUSD),
		Left: fmt.Sprintf("$%.2f", max(limit-t.Used(), 0)), Unknown: t.Unknown}, true
}

func dollars(v float64) string {
	if v <= 0 {
		return "none"
	}
	return fmt.Sprintf("$%.2f", v)
}
