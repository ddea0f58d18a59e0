package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The checks before the PR through the bot: the plan's files ride in the
// plan comment's marker to the execute run's work order (and from there
// to a revise run on the PR); the receipt's secret scan, dependencies,
// plan comparison and review reach the PR body vetted like every other
// text the sandbox wrote: redacted, one line per cell, no backticks that
// close a code span, no mentions.
func TestChecksBeforeThePRReachThePRBody(t *testing.T) {
	const leak = "sk-ant-CHECKS-value-1234567890"
	t.Setenv("BOTTRUST_CHECKS_KEY", leak)
	h := newHarness(t, nil, map[string]string{"SANDBOX_PASS_ENV": "BOTTRUST_CHECKS_KEY"})
	n := h.gh.AddIssue(testRepo, writer, "Greet", "")
	h.label(n, writer, "d-checks")
	plan := h.waitSubmitted(1)[0]
	files := []dispatch.PlanFile{{Path: "greet.go", Note: "the greeting"}, {Path: "docs/", Note: "key " + leak}, {Path: "a`b|c.go"}}
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "## Files\n- `greet.go`", PlanFiles: files})
	h.waitComment(n, "plan comment", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	want := []dispatch.PlanFile{{Path: "greet.go", Note: "the greeting"}, {Path: "docs/", Note: "key [REDACTED]"}, {Path: "a'b/c.go"}}
	if got := exec.Order.PlanFiles; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("the execute run's plan files = %+v, want %+v", got, want)
	}

	sha := h.gh.CreateBranch(testRepo, exec.Order.TargetBranch, "main")
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusCompleted, Branch: exec.Order.TargetBranch,
		HeadSHA: sha, Commits: []dispatch.Commit{{SHA: sha, Message: "x"}}, TokenUsage: dispatch.TokenUsage{TotalCostUSD: 1.25, Steps: 6},
		SecretScan: &dispatch.SecretScan{Scanner: "gitleaks 8.30.1", Commits: 3, Repaired: 2, Squashed: 1,
			Allowed: []dispatch.SecretFinding{{Rule: "aws-access-token", File: "testdata/key.go", Line: 1, Allowlist: ".gitleaksignore"}}},
		Dependencies: &dispatch.Dependencies{AdvisoryDB: "OSV, 12 advisories", Changes: []dispatch.DependencyChange{
			{Ecosystem: "npm", Name: "left-pad", Change: "added", To: "1.3.1", Manifest: "package-lock.json"},
			{Ecosystem: "Go", Name: "github.com/google/uuid", Change: "changed", From: "v1.5.0", To: "v1.6.0", Manifest: "go.mod"}}},
		PlanScope: &dispatch.PlanScope{Items: []dispatch.PlanItem{{Path: "greet.go", Note: "the greeting", Changed: []string{"greet.go"}}, {Path: "docs/"}},
			Outside: []dispatch.OutsideChange{{File: "Makefile", Reason: "cc @octocat, the build `needed` it | " + leak}}},
		Review: &dispatch.Review{Harness: "opencode", Model: "scripted/reviewer", CostUSD: 0.05, Text: "**Risks**\n- none, ask @octocat <!-- hidden -->"},
	})
	var pr int
	h.gh.WaitFor(10*time.Second, "PR opened", func() bool {
		if prs := h.gh.PullRequests(testRepo); len(prs) == 1 {
			pr = prs[0].Number
		}
		return pr != 0
	})
	body := h.gh.Issue(testRepo, pr).Body
	for _, want := range []string{
		"### Against the approved plan", "| `greet.go` — the greeting | `greet.go` |", "| `docs/` | not changed |",
		"#### Outside the approved plan", "- `Makefile` — cc @\u200boctocat, the build 'needed' it / [REDACTED]",
		"### Dependencies", "| added | `left-pad` (npm) | 1.3.1 | `package-lock.json` |", "| changed | `github.com/google/uuid` (Go) | v1.5.0 → v1.6.0 | `go.mod` |",
		"Advisories (OSV, 12 advisories): none known",
		"### Secret scan", "gitleaks 8.30.1: 3 commit(s) scanned before they were pushed; 2 finding(s) removed by the repair loop before any push, the held commits rewritten into one; nothing blocking.",
		"- `aws-access-token` at `testdata/key.go:1` (.gitleaksignore)",
		"### Reviewer's pass", "**Risks**", "A fresh read-only session (opencode, `scripted/reviewer`)", "$0.05",
		"| Cost | $1.25 (reviewer's pass $0.05) |",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the PR body lacks %q", want)
		}
	}
	for _, bad := range []string{leak, "<!-- hidden", "@octocat"} {
		if strings.Contains(body, bad) {
			t.Errorf("the PR body holds %q", bad)
		}
	}
	if t.Failed() {
		t.Logf("PR body:\n%s", body)
	}

	// A revise run on the PR compares its change with the same files,
	// read from the issue's plan comment.
	h.idle()
	h.comment(pr, writer, "/revise shorter names")
	rev := h.waitSubmitted(3)[2]
	if rev.Order.Mode != dispatch.ModeRevise || len(rev.Order.PlanFiles) != 3 || rev.Order.PlanFiles[0].Path != "greet.go" {
		t.Fatalf("the revise run's plan files = %+v (%s)", rev.Order.PlanFiles, rev.Order.Mode)
	}
	// Its completed receipt's checks replace the body's: the branch as it
	// is now.
	done := completed(rev, "3333333")
	done.PlanScope = &dispatch.PlanScope{Items: []dispatch.PlanItem{{Path: "greet.go", Changed: []string{"greet.go"}}}}
	done.Review = &dispatch.Review{Harness: "opencode", Text: "Second look: fine.", CostUSD: 0.02}
	h.backend.Finish(rev.Order.TaskID, done)
	h.gh.WaitFor(10*time.Second, "the revise run's checks in the PR body", func() bool {
		body = h.gh.Issue(testRepo, pr).Body
		return strings.Contains(body, "Second look: fine.")
	})
	if strings.Contains(body, "Makefile") || strings.Count(body, "sandbox-bot:checks-start") != 1 || !strings.Contains(body, "Every changed file is within the plan's files.") ||
		!strings.Contains(body, rev.Order.TaskID) || !strings.Contains(body, "Closes #") {
		t.Fatalf("the PR body after the revise run:\n%s", body)
	}
}
