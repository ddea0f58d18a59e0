package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// Monthly budgets. Every run reserves its own budget in the ledger
// before it is submitted (begin), where every replica sees it and checked
// against the month's spend and what the runs in flight reserved; a run
// whose budget does not fit runs with what is left when that is at least
// the floor, and is refused otherwise (github/over_budget, the
// agent:over-budget label; nothing starts). The run settles to its real
// cost where its result is read (Runs.follow), once, also after a restart;
// a run whose cost nobody reported counts by its budget.

// policyFor is the server's budgets lowered by the run's configuration
// (the organisation's and the repository's .sandbox.yml).
func policyFor(c *core, cfg sandboxcfg.Resolved) budget.Policy {
	p := c.Budgets
	p.InstallationUSD = sandboxcfg.Lowest(p.InstallationUSD, cfg.Budgets.InstallationMonthlyUSD)
	p.RepoUSD = sandboxcfg.Lowest(p.RepoUSD, cfg.Budgets.RepoMonthlyUSD)
	return p
}

// reserve reserves the run's budget. on is false when no budget applies
// (nothing is reserved); an *budget.OverBudget is a refusal.
func reserveBudget(ctx context.Context, c *core, l launch) (g budget.Grant, on bool, err error) {
	p := policyFor(c, l.cfg)
	if c.Budget == nil || !p.Any() {
		return budget.Grant{}, false, nil
	}
	g, err = c.Budget.Reserve(ctx, budget.Request{
		TaskID: l.taskID, InstallationID: l.req.InstallationID, Repo: l.req.Repo.GetFullName(), Month: p.Month(c.Now()),
		AmountUSD: l.cfg.MaxBudgetUSD, InstallationUSD: p.InstallationUSD, RepoUSD: p.RepoUSD, FloorUSD: p.FloorUSD,
	})
	if err == nil {
		zerolog.Ctx(ctx).Info().Float64("budget_usd", g.AmountUSD).Bool("trimmed", g.Trimmed).Bool("existing", g.Existing).Msg("budget reserved")
	}
	return g, true, err
}

// grantBudget gives the run the budget it was granted (less than its own
// when the month had less left).
func grantBudget(spec *dispatch.RunSpec, g budget.Grant) {
	if g.Trimmed && g.AmountUSD > 0 {
		spec.Order.BudgetUSD = g.AmountUSD
		spec.Order.Config.MaxBudgetUSD = g.AmountUSD
	}
}

// releaseBudget gives back the reservation of a run that did not start.
func releaseBudget(ctx context.Context, c *core, taskID string) {
	if c.Budget == nil {
		return
	}
	if err := c.Budget.Release(ctx, taskID); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("release budget reservation after failed start")
	}
}

// OverBudgetData is github/over_budget: a run refused because its budget
// did not fit what was left of the month.
type OverBudgetData struct {
	Mode dispatch.Mode
	// Scope is "installation" or "repository".
	Scope string
	// The figures, formatted as dollars.
	Budget, Spent, Reserved, Left, Asked, Floor string
	// Unknown counts this month's runs of unknown cost (counted by their
	// budget).
	Unknown int
	// Resets is when the month turns (UTC, or the budgets' time zone).
	Resets string
	// Setting names the server setting that raises the budget.
	Setting string
	// Again is the command that asks for the run again: /approve on an
	// issue, /retry on a pull request (where /approve has no place).
	Again  string
	Marker string
}

func usd(v float64) string { return fmt.Sprintf("$%.2f", v) }

// overBudgetData is the refusal's text of over.
func overBudgetData(l launch, over *budget.OverBudget, resets time.Time) OverBudgetData {
	setting := "budgets.installation_monthly_usd"
	if over.Scope == "repository" {
		setting = "budgets.repo_monthly_usd"
	}
	return OverBudgetData{
		Mode: l.mode, Scope: over.Scope, Budget: usd(over.BudgetUSD), Spent: usd(over.Totals.SpentUSD), Reserved: usd(over.Totals.ReservedUSD),
		Left: usd(over.LeftUSD), Asked: usd(over.AskedUSD), Floor: usd(over.FloorUSD), Unknown: over.Totals.Unknown,
		Resets: resets.Format("2 January 2006 15:04 MST"), Setting: setting, Again: againCommand(l.req.IsPR),
		Marker: markers.Marker{Kind: markers.KindOverBudget, TaskID: l.taskID, Mode: l.mode, Issue: l.req.Issue, Branch: l.req.Branch}.String(),
	}
}

func againCommand(isPR bool) string {
	if isPR {
		return "/retry"
	}
	return "/approve"
}

// refuseOverBudget answers a run the ledger refused: the state label
// (under the lock the start still holds) and the comment with the figures.
func refuseOverBudget(ctx context.Context, c *core, gh hub.GitHub, l launch, over *budget.OverBudget) error {
	zerolog.Ctx(ctx).Info().Str("scope", over.Scope).Float64("budget_usd", over.BudgetUSD).Float64("spent_usd", over.Totals.SpentUSD).
		Float64("reserved_usd", over.Totals.ReservedUSD).Float64("asked_usd", over.AskedUSD).Msg("refusing: over the monthly budget")
	p := policyFor(c, l.cfg)
	labelErr := c.setState(ctx, gh, l.req.Number, lifecycle.OverBudget)
	if err := c.reply(ctx, gh, l.req.Number, "github/over_budget", overBudgetData(l, over, p.Resets(c.Now()))); err != nil {
		return err
	}
	return labelErr
}

// costOf is what an ended run cost, and whether anyone reported it: a
// run without a result, or whose result names no cost (a command
// harness, a model without a price), is unknown and counts by its budget.
func costOf(res *dispatch.Result) (float64, bool) {
	if res == nil || res.TokenUsage.TotalCostUSD <= 0 {
		return 0, false
	}
	return res.TokenUsage.TotalCostUSD, true
}

// settle settles the ended run's reservation to its cost, once: a
// restarted bot reading the same result again changes nothing.
func (k *resultKeeper) settle(ctx context.Context, meta dispatch.Meta, res *dispatch.Result) {
	cost, known := costOf(res)
	k.settleCost(ctx, meta.TaskID, cost, known)
}

// settleCost settles taskID's reservation to cost (to its budget when the
// cost is not known).
func (k *resultKeeper) settleCost(ctx context.Context, taskID string, cost float64, known bool) {
	if k.c.Budget == nil {
		return
	}
	if err := k.c.Budget.Settle(context.WithoutCancel(ctx), taskID, cost, known); err != nil {
		// The reservation stays, counting by the run's budget: never less
		// than it cost.
		zerolog.Ctx(ctx).Error().Err(err).Msg("settle the run's budget reservation")
		return
	}
	zerolog.Ctx(ctx).Info().Float64("cost_usd", cost).Bool("cost_known", known).Msg("budget settled")
}

// asOverBudget is err's refusal, if it is one.
func asOverBudget(err error) (*budget.OverBudget, bool) {
	var over *budget.OverBudget
	return over, errors.As(err, &over)
}

// BudgetLine is one budget's month in /status.
type BudgetLine struct {
	// Scope is "installation" or "repository".
	Scope                         string
	Budget, Spent, Reserved, Left string
	Unknown                       int
}

// budgetLines are the month's figures of the budgets that apply to the
// repository's runs (the server's, lowered by its configuration on the
// default branch; the server's alone when that cannot be read), nil when
// none is set or the ledger cannot be read (logged).
func budgetLines(ctx context.Context, c *core, installation int64, gh hub.GitHub) []BudgetLine {
	if c.Budget == nil {
		return nil
	}
	p := c.Budgets
	if cfg, err := c.loadConfig(ctx, installation, gh, "", sandboxcfg.Flags{}); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("/status: read .sandbox.yml for its budgets; showing the server's")
	} else {
		p = policyFor(c, cfg)
	}
	if !p.Any() {
		return nil
	}
	repo := gh.FullName()
	it, rt, err := c.Budget.Totals(ctx, installation, repo, p.Month(c.Now()))
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("/status: read the month's budget figures")
		return nil
	}
	var lines []BudgetLine
	for _, b := range []struct {
		scope  string
		budget float64
		t      budget.Totals
	}{{"installation", p.InstallationUSD, it}, {"repository", p.RepoUSD, rt}} {
		if b.budget > 0 {
			lines = append(lines, BudgetLine{Scope: b.scope, Budget: usd(b.budget), Spent: usd(b.t.SpentUSD), Reserved: usd(b.t.ReservedUSD),
				Left: usd(max(b.budget-b.t.Used(), 0)), Unknown: b.t.Unknown})
		}
	}
	return lines
}
