package handlers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// budgetTen is a $10 monthly budget for the installation, with a $3 floor;
// each run's own budget is $4 (defaultSandboxYML).
var budgetTen = map[string]string{"SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD": "10", "SANDBOX_BUDGET_FLOOR_USD": "3"}

func planCost(taskID string, cost float64) *dispatch.Result {
	r := planDone(taskID)
	r.TokenUsage = dispatch.TokenUsage{Input: 1000, Output: 200, TotalCostUSD: cost, Steps: 2}
	return r
}

// assertMonth asks /status on #n and checks it tells the month's budget
// as want.
func assertMonth(h *harness, n int, want string) {
	h.t.Helper()
	h.comment(n, reader, "/status")
	status := h.waitComment(n, "/status", func(c string) bool { return strings.Contains(c, "This month") })
	if !strings.Contains(status, want) {
		h.t.Errorf("/status on #%d does not say %q:\n%s", n, want, status)
	}
}

// specOf is the run submitted for issue n (the last one).
func specOf(t *testing.T, h *harness, n int) dispatch.RunSpec {
	t.Helper()
	var out dispatch.RunSpec
	for _, s := range h.backend.Specs() {
		if s.Meta.Number == n {
			out = s
		}
	}
	if out.Meta.TaskID == "" {
		t.Fatalf("no run submitted for #%d", n)
	}
	return out
}

// Budgets through the handlers on the memory backend: two $4 runs fit
// $10, the third is refused with the figures and agent:over-budget and
// nothing starts; a settled run leaves room and the writer's /approve
// starts the refused one; a run of unknown cost counts by its budget; a
// run over what is left but above the floor runs with what is left.
func TestBudgetAdmitsRefusesAndSettles(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, budgetTen)
	issues := newIssues(h, 4)
	for i, n := range issues[:3] {
		h.label(n, writer, fmt.Sprintf("d-budget-%d", i))
		h.waitComment(n, "the answer to the label", func(c string) bool {
			return strings.Contains(c, `"kind":"ack"`) || strings.Contains(c, `"kind":"over-budget"`)
		})
	}
	if got := submittedIssues(h); len(got) != 2 {
		t.Fatalf("runs of %v submitted, want the first two only", got)
	}
	refusal := h.waitComment(issues[2], "the refusal", func(c string) bool { return strings.Contains(c, `"kind":"over-budget"`) })
	for _, want := range []string{"monthly budget is $10.00", "$0.00 is spent", "$8.00 is reserved", "leaves $2.00", "floor of $3.00", "budget resets on 1 ", "`budgets.installation_monthly_usd`", "`/approve`"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, refusal)
		}
	}
	if !labelled(h, issues[2], "agent:over-budget") || labelled(h, issues[2], "agent:planning") {
		t.Errorf("#%d labels %v, want agent:over-budget", issues[2], h.gh.Issue(testRepo, issues[2]).Labels)
	}

	// #1 ends at $1.50: $4.50 left, the refused plan starts on /approve.
	first := specOf(t, h, issues[0])
	h.backend.Finish(first.Order.TaskID, planCost(first.Order.TaskID, 1.5))
	h.waitComment(issues[0], "the plan", func(c string) bool { return strings.Contains(c, `"kind":"plan"`) })
	h.comment(issues[2], writer, "/approve")
	h.waitSubmitted(3)
	if s := specOf(t, h, issues[2]); s.Meta.Mode != dispatch.ModePlan || s.Order.BudgetUSD != 4 {
		t.Errorf("/approve after the refusal started a %s run with $%.2f, want the plan run with its $4", s.Meta.Mode, s.Order.BudgetUSD)
	}

	// #2 ends without a cost: it counts by its $4 budget, never $0.
	second := specOf(t, h, issues[1])
	h.backend.Finish(second.Order.TaskID, planCost(second.Order.TaskID, 0))
	h.waitComment(issues[1], "the plan", func(c string) bool { return strings.Contains(c, `"kind":"plan"`) })
	// #3 ends at $0.90: $1.50 + $4 (unknown) + $0.90 spent, $3.60 left.
	third := specOf(t, h, issues[2])
	h.backend.Finish(third.Order.TaskID, planCost(third.Order.TaskID, 0.9))
	h.waitComment(issues[2], "the plan", func(c string) bool { return strings.Contains(c, `"kind":"plan"`) })

	h.label(issues[3], writer, "d-budget-3")
	h.waitSubmitted(4)
	if s := specOf(t, h, issues[3]); s.Order.BudgetUSD != 3.6 || s.Order.Config.MaxBudgetUSD != 3.6 {
		t.Errorf("a $4 run with $3.60 left (floor $3) got $%.2f (config $%.2f), want the $3.60 left", s.Order.BudgetUSD, s.Order.Config.MaxBudgetUSD)
	}
	assertMonth(h, issues[3], "the installation's budget of $10.00: $6.40 spent (1 of unknown cost, counted by budget), $3.60 reserved by runs in flight, $0.00 left")
	// The gauges read the same ledger: $6.40 spent, $3.60 in flight, of $10.
	for sample, want := range map[string]string{
		`sandbox_bot_budget_spent_usd{installation="42"}`:    "6.4",
		`sandbox_bot_budget_reserved_usd{installation="42"}`: "3.6",
		`sandbox_bot_budget_usd{installation="42"}`:          "10",
	} {
		if got := adminMetric(t, h, sample); got != want {
			t.Errorf("%s = %s, want %s", sample, got, want)
		}
	}
}

// A bot stopped while its run goes on settles the run once when a
// restarted bot reads its result: the reservation is neither lost (the
// book is the backend's) nor counted twice (a second settle changes
// nothing), and a restart after the result is posted changes nothing more.
func TestBudgetSettlesOnceAfterARestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, budgetTen)
	n := newIssues(h, 1)[0]
	h.label(n, writer, "d-budget-restart")
	spec := h.waitSubmitted(1)[0]
	h.stop()
	h.backend.Finish(spec.Order.TaskID, planCost(spec.Order.TaskID, 2.25))
	h.start(budgetTen)
	h.waitComment(n, "the plan, posted by the restarted bot", func(c string) bool { return strings.Contains(c, `"kind":"plan"`) })
	h.idle()
	h.stop()
	h.start(budgetTen)
	assertMonth(h, n, "the installation's budget of $10.00: $2.25 spent, $0.00 reserved by runs in flight, $7.75 left")
}

// An interrupted run settles to what it cost before its continuation
// reserves: the month holds the first attempt's cost and the second's
// reservation, not two reservations.
func TestBudgetInterruptedRunSettlesBeforeItsContinuation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, budgetTen)
	n := newIssues(h, 1)[0]
	h.label(n, writer, "d-budget-continue")
	first := h.waitSubmitted(1)[0]
	res := planCost(first.Order.TaskID, 1)
	res.Status, res.Plan = dispatch.StatusInterrupted, ""
	h.backend.Finish(first.Order.TaskID, res)
	second := h.waitSubmitted(2)[1]
	if second.Meta.Attempt != 2 {
		t.Fatalf("the second run is attempt %d, want the continuation (2)", second.Meta.Attempt)
	}
	assertMonth(h, n, "$1.00 spent, $4.00 reserved by runs in flight, $5.00 left")
}

// /status shows the budgets as the repository's runs have them: the
// server's $10 for the installation and $20 for the repository, lowered by
// the repository's .sandbox.yml to $8 and $6.
func TestStatusShowsTheBudgetsTheRepositoryLowered(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD": "10", "SANDBOX_BUDGET_REPO_MONTHLY_USD": "20", "SANDBOX_BUDGET_FLOOR_USD": "1"}
	h := newHarness(t, map[string]string{".sandbox.yml": defaultSandboxYML + "budgets: { installation_monthly_usd: 8, repo_monthly_usd: 6 }\n"}, env)
	n := newIssues(h, 1)[0]
	h.label(n, writer, "d-budget-lowered")
	h.waitSubmitted(1)
	h.comment(n, reader, "/status")
	status := h.waitComment(n, "/status", func(c string) bool { return strings.Contains(c, "This month") })
	for _, want := range []string{"the installation's budget of $8.00: $0.00 spent, $4.00 reserved by runs in flight, $4.00 left",
		"the repository's budget of $6.00: $0.00 spent, $4.00 reserved by runs in flight, $2.00 left"} {
		if !strings.Contains(status, want) {
			t.Errorf("/status does not say %q:\n%s", want, status)
		}
	}
}
