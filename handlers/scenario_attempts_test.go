package handlers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// attemptResult is what attempt k of the scenario leaves: a commit on
// its branch of size lines, and whether the test check passed.
func attemptResult(h *harness, spec dispatch.RunSpec, lines int, passed bool) (string, *dispatch.Result) {
	branch := spec.Order.TargetBranch
	h.gh.CreateBranch(testRepo, branch, "main")
	sha := h.gh.CommitFile(testRepo, branch, fmt.Sprintf("attempt%d.go", spec.Order.Variant), strings.Repeat("x\n", lines), "attempt")
	return sha, &dispatch.Result{
		Mode: dispatch.ModeExecute, Status: dispatch.StatusCompleted, DurationSeconds: 30, Branch: branch, HeadSHA: sha,
		Commits:    []dispatch.Commit{{SHA: sha, Message: "attempt"}},
		DiffStats:  dispatch.DiffStats{FilesChanged: 1, Insertions: lines},
		PRSummary:  fmt.Sprintf("Attempt %d.", spec.Order.Variant),
		Validation: []dispatch.CheckResult{{Name: "test", Command: "go test ./...", Passed: passed, Attempts: 1}},
		TokenUsage: dispatch.TokenUsage{Input: 1000, Output: 100, TotalCostUSD: 0.1 * float64(spec.Order.Variant), Steps: 3},
	}
}

// TestApproveAttemptsPicksByChecks: /approve --attempts 3 starts three
// execute runs from the one plan, each told which it is, on branches of
// their own; once all have ended, one PR carries the attempt that passed
// with the least change, with a table of all three; /pick 2 moves the
// branch to attempt 2's commit and the table says so.
func TestApproveAttemptsPicksByChecks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Add a greeting endpoint", "Return hello on /greet.")
	h.label(n, writer, "d-attempts-1")
	plan := h.waitSubmitted(1)[0]
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Add `GET /greet`."})
	h.waitComment(n, "plan comment", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })

	h.comment(n, writer, "/approve --attempts 3")
	specs := h.waitSubmitted(4)[1:]
	var set string
	h.waitComment(n, "the approval's acknowledgement", func(c string) bool { return strings.Contains(c, "Started **3 attempts**") })
	for i, s := range specs {
		k := i + 1
		if s.Order.Mode != dispatch.ModeExecute || s.Order.Variant != k || s.Order.Variants != 3 || s.Meta.Variant != k {
			t.Fatalf("run %d: mode %s attempt %d of %d (meta %d), want execute attempt %d of 3", k, s.Order.Mode, s.Order.Variant, s.Order.Variants, s.Meta.Variant, k)
		}
		if s.Order.Plan != "1. Add `GET /greet`." {
			t.Errorf("attempt %d runs plan %q", k, s.Order.Plan)
		}
		set = s.Meta.Set
		if want := "agent/" + strings.ToLower(set) + fmt.Sprintf("-a%d", k); s.Order.TargetBranch != want {
			t.Errorf("attempt %d branch %q, want %q", k, s.Order.TargetBranch, want)
		}
	}
	if h.backend.LockHolder(dispatch.LockKey(testRepo, n)) != set {
		t.Errorf("the issue's lock is held by %q, want the approval %s", h.backend.LockHolder(dispatch.LockKey(testRepo, n)), set)
	}
	var heads []string
	for i, r := range []struct {
		lines  int
		passed bool
	}{{2, false}, {40, true}, {5, true}} {
		sha, res := attemptResult(h, specs[i], r.lines, r.passed)
		heads = append(heads, sha)
		h.backend.Finish(specs[i].Order.TaskID, res)
		if i < 2 {
			// The PR waits for every attempt: this one's end is its
			// check run, and no PR.
			title := fmt.Sprintf("Attempt %d of 3", i+1)
			h.gh.WaitFor(5*time.Second, title+"'s check run", func() bool {
				return slices.ContainsFunc(h.gh.CheckRuns(testRepo), func(c githubtest.CheckRun) bool {
					return c.Status == "completed" && strings.HasPrefix(c.Title, title)
				})
			})
			if prs := h.gh.PullRequests(testRepo); len(prs) != 0 {
				t.Fatalf("a PR opened after %d of 3 attempts", i+1)
			}
		}
	}
	h.waitComment(n, "PR link", func(c string) bool { return strings.Contains(c, "🚀 Opened") })
	prs := h.gh.PullRequests(testRepo)
	if len(prs) != 1 {
		t.Fatalf("want one PR, got %d", len(prs))
	}
	pr := prs[0]
	if got := h.gh.BranchSHA(testRepo, pr.PR.Head); got != heads[2] {
		t.Errorf("the PR's branch %s is at %s, want attempt 3's %s", pr.PR.Head, got, heads[2])
	}
	for _, want := range []string{"### Attempts", "This branch carries **attempt 3**", "failed test", "+40 −0", "+5 −0", "+2 −0"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("PR body lacks %q:\n%s", want, pr.Body)
		}
	}
	h.gh.WaitFor(5*time.Second, "the approval lets the issue go", func() bool {
		return h.backend.LockHolder(dispatch.LockKey(testRepo, n)) == ""
	})

	h.comment(pr.Number, writer, "/pick 2")
	h.waitComment(pr.Number, "pick reply", func(c string) bool { return strings.Contains(c, "to attempt 2's commit") })
	if got := h.gh.BranchSHA(testRepo, pr.PR.Head); got != heads[1] {
		t.Errorf("after /pick 2 the PR's branch is at %s, want attempt 2's %s", got, heads[1])
	}
	body := h.gh.Issue(testRepo, pr.Number).Body
	if !strings.Contains(body, "This branch carries **attempt 2**, picked by @"+writer) {
		t.Errorf("PR body does not say attempt 2 was picked:\n%s", body)
	}
	h.comment(pr.Number, writer, "/pick 9")
	h.waitComment(pr.Number, "pick refusal", func(c string) bool { return strings.Contains(c, "there were 3 attempts") })
	if slices.Contains(heads, "") {
		t.Fatal("an attempt left no commit")
	}

	// Merged: the attempts' branches go, the PR's stays (GitHub's
	// setting decides it).
	repo := h.gh.Repo(testRepo)
	merged := h.payload("pull_request.closed.json", writer, func(m map[string]any) {
		side := map[string]any{"id": repo.ID, "full_name": testRepo, "fork": false}
		m["pull_request"] = map[string]any{"number": pr.Number, "merged": true, "state": "closed", "body": h.gh.Issue(testRepo, pr.Number).Body,
			"user": map[string]any{"login": githubtest.AppLogin, "type": "Bot"},
			"head": map[string]any{"ref": pr.PR.Head, "repo": side}, "base": map[string]any{"ref": "main", "repo": side}}
	})
	h.deliver("pull_request", "d-merged", merged)
	h.gh.WaitFor(5*time.Second, "the attempts' branches deleted", func() bool {
		for k := 1; k <= 3; k++ {
			if h.gh.BranchSHA(testRepo, fmt.Sprintf("agent/%s-a%d", strings.ToLower(set), k)) != "" {
				return false
			}
		}
		return true
	})
	if h.gh.BranchSHA(testRepo, pr.PR.Head) == "" {
		t.Error("the PR's own branch was deleted")
	}
}

// TestAbortAttempts: with one slot, /approve --attempts 3 runs attempt 1
// and queues the others; /abort takes the waiting ones out of the queue
// and cancels the running one, and the approval ends aborted, without a
// PR, letting the issue go.
func TestAbortAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, map[string]string{"SANDBOX_MAX_RUNS": "1"})
	n := h.gh.AddIssue(testRepo, writer, "Add a greeting endpoint", "Return hello on /greet.")
	h.label(n, writer, "d-attempts-abort")
	plan := h.waitSubmitted(1)[0]
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Add `GET /greet`."})
	h.waitComment(n, "plan comment", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.gh.WaitFor(5*time.Second, "the plan run's slot freed", func() bool { return h.backend.LockHolder(dispatch.LockKey(testRepo, n)) == "" })

	h.comment(n, writer, "/approve --attempts 3")
	first := h.waitSubmitted(2)[1]
	if first.Order.Variant != 1 {
		t.Fatalf("the first run to start is attempt %d", first.Order.Variant)
	}
	h.gh.WaitFor(5*time.Second, "two attempts queued", func() bool {
		queued := 0
		for _, c := range h.botComments(n) {
			if strings.Contains(c, `"kind":"queued"`) {
				queued++
			}
		}
		return queued == 2
	})
	if labels := h.gh.Issue(testRepo, n).Labels; !hasLabel(labels, "agent:running") || hasLabel(labels, "agent:queued") {
		t.Errorf("labels %v while attempt 1 runs and two wait, want agent:running alone", labels)
	}
	h.backend.CancelEndsRun = true
	h.comment(n, writer, "/abort")
	c := h.waitComment(n, "the approval's end", func(c string) bool { return strings.Contains(c, "The attempts were aborted") })
	for _, want := range []string{"| 1 | ", "aborted", "| 2 | ", "| 3 | ", "failed to start"} {
		if !strings.Contains(c, want) {
			t.Errorf("the aborted approval's comment lacks %q:\n%s", want, c)
		}
	}
	if got := len(h.backend.Specs()); got != 2 {
		t.Errorf("%d runs submitted, want the plan and attempt 1", got)
	}
	if prs := h.gh.PullRequests(testRepo); len(prs) != 0 {
		t.Errorf("an aborted approval opened %d PRs", len(prs))
	}
	h.gh.WaitFor(5*time.Second, "the issue let go", func() bool { return h.backend.LockHolder(dispatch.LockKey(testRepo, n)) == "" })
	if hasLabel(h.gh.Issue(testRepo, n).Labels, "agent:running") {
		t.Errorf("labels %v after the abort, want no agent:running", h.gh.Issue(testRepo, n).Labels)
	}
}

// TestApproveAttemptsFlagIsStrict: --attempts takes a whole number from 1
// to limits.max_attempts; anything else is answered and starts nothing.
func TestApproveAttemptsFlagIsStrict(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Add a greeting endpoint", "Return hello on /greet.")
	h.label(n, writer, "d-attempts-strict")
	plan := h.waitSubmitted(1)[0]
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Add `GET /greet`."})
	h.waitComment(n, "plan comment", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	for _, tc := range []struct{ cmd, reply string }{
		{"/approve --attempts two", "`--attempts` takes a whole number of runs from 1 up, got `two`."},
		{"/approve --attempts 0", "`--attempts` takes a whole number of runs from 1 up, got `0`."},
		{"/approve --attempts 9", "`/approve --attempts` asks for 9 attempts, more than this server allows: its ceiling is 4 attempts"},
	} {
		h.comment(n, writer, tc.cmd)
		h.waitComment(n, tc.cmd, func(c string) bool { return strings.Contains(c, tc.reply) })
	}
	if got := len(h.backend.Specs()); got != 1 {
		t.Errorf("%d runs submitted, want the plan's alone", got)
	}
}

// TestAttemptsEachAgainstTheBudget: each attempt reserves its own budget;
// the one that does not fit the month's is an attempt that could not
// start (it ranks last), and the approval ends with the others' PR.
func TestAttemptsEachAgainstTheBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, budgetTen)
	n := h.gh.AddIssue(testRepo, writer, "Add a greeting endpoint", "Return hello on /greet.")
	h.label(n, writer, "d-attempts-budget")
	plan := h.waitSubmitted(1)[0]
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Add `GET /greet`.",
		TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.01}})
	h.waitComment(n, "plan comment", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })

	// $10 a month: the plan spent $0.01, two $4 attempts fit, the third
	// finds $1.99 left, under the floor of $3.
	h.comment(n, writer, "/approve --attempts 3")
	refused := h.waitComment(n, "attempt 3 refused", func(c string) bool { return strings.Contains(c, "Attempt 3 of 3 could not start") })
	if !strings.Contains(refused, "$4.00 did not fit the $1.99 left of the installation's month") {
		t.Errorf("the refusal does not say the budget:\n%s", refused)
	}
	specs := h.waitSubmitted(3)[1:]
	for i, s := range specs {
		_, res := attemptResult(h, s, 10*(i+1), true)
		h.backend.Finish(s.Order.TaskID, res)
	}
	h.waitComment(n, "PR link", func(c string) bool { return strings.Contains(c, "🚀 Opened") })
	body := h.gh.PullRequests(testRepo)[0].Body
	for _, want := range []string{"This branch carries **attempt 1**", "| 3 | 3 | failed to start"} {
		if !strings.Contains(body, want) {
			t.Errorf("PR body lacks %q:\n%s", want, body)
		}
	}
	if got := len(h.backend.Specs()); got != 3 {
		t.Errorf("%d runs submitted, want the plan and two attempts", got)
	}
}
