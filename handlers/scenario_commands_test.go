package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// planned labels an issue and finishes its plan run, returning the issue
// number and the plan run's task id.
func (h *harness) planned(title string) (int, string) {
	h.t.Helper()
	n := h.gh.AddIssue(testRepo, writer, title, "Please do it.")
	before := len(h.backend.Specs())
	h.label(n, writer, fmt.Sprintf("d-label-%d", n))
	spec := h.waitSubmitted(before + 1)[before]
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Do it.",
		TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.10, Steps: 2}})
	h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.released(n)
	return n, spec.Order.TaskID
}

// released waits until the issue's lock is free. A run's result comment is
// posted before its follower releases the lock, so a command sent on seeing
// the comment could otherwise find the issue busy.
func (h *harness) released(n int) {
	h.t.Helper()
	h.gh.WaitFor(5*time.Second, "issue lock released", func() bool { return h.backend.LockHolder(dispatch.LockKey(testRepo, n)) == "" })
}

// agentPR opens a PR from an agent branch for issue, as the bot would have.
func (h *harness) agentPR(issue int) int {
	h.t.Helper()
	branch := fmt.Sprintf("agent/t-0000000%d-fix", issue)
	h.gh.CreateBranch(testRepo, branch, "main")
	pr := h.gh.AddPullRequest(testRepo, "sandbox-bot[bot]", "Fix", branch, "main")
	h.gh.SetBody(testRepo, pr, markers.Marker{Kind: markers.KindPR, TaskID: "T-00000001", Mode: dispatch.ModeExecute, Issue: issue, Branch: branch}.String()+"\nCloses #1")
	return pr
}

func TestReviseRoundsReplanWithFeedback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("Add caching")
	h.comment(n, writer, "/revise use an LRU\nand keep it under 100 lines")
	spec := h.waitSubmitted(2)[1]
	if spec.Order.Mode != dispatch.ModePlan || spec.Order.Feedback != "use an LRU\nand keep it under 100 lines" || spec.Order.Plan != "1. Do it." {
		t.Fatalf("revise must re-plan with the feedback and the previous plan; got mode %s feedback %q plan %q", spec.Order.Mode, spec.Order.Feedback, spec.Order.Plan)
	}
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Use an LRU.", TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.05}})
	c := h.waitComment(n, "round 2 plan", func(c string) bool { return strings.Contains(c, "round 2 of at most 5") })
	if !strings.Contains(c, "$0.15 so far on this issue") {
		t.Errorf("round 2 must add up the cost of both rounds:\n%s", c)
	}
}

func TestAbortCancelsRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("Slow task")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	h.comment(n, reader, "/abort")
	h.waitComment(n, "refusal of a reader's abort", func(c string) bool { return strings.Contains(c, "@mallory") && strings.Contains(c, "Only people") })
	if h.backend.Cancels(exec.Order.TaskID) != 0 {
		t.Fatal("a reader's /abort cancelled the run")
	}
	h.comment(n, writer, "/abort")
	c := h.waitComment(n, "aborted receipt", func(c string) bool { return strings.Contains(c, "was aborted") })
	if !strings.Contains(c, "by @alice") || h.backend.Cancels(exec.Order.TaskID) != 1 {
		t.Errorf("abort comment %q, cancels %d", c, h.backend.Cancels(exec.Order.TaskID))
	}
	// An aborted run is not continued automatically.
	h.idle()
	if got := len(h.backend.Specs()); got != 2 {
		t.Errorf("after /abort there must be no continue run; runs: %d", got)
	}
	h.comment(n, writer, "/abort")
	h.waitComment(n, "nothing to abort", func(c string) bool { return strings.Contains(c, "Nothing is running here") })
}

func TestBusyIssueGetsAReply(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Task", "")
	h.label(n, writer, "d-1")
	first := h.waitSubmitted(1)[0]
	h.comment(n, writer, "/plan")
	c := h.waitComment(n, "busy reply", func(c string) bool { return strings.Contains(c, "is still running here") })
	if !strings.Contains(c, first.Order.TaskID) {
		t.Errorf("busy reply must name the running task:\n%s", c)
	}
	if got := len(h.backend.Specs()); got != 1 {
		t.Fatalf("second trigger started %d runs", got)
	}
}

func TestInterruptedRunContinuesThenGivesUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, map[string]string{"SANDBOX_MAX_CONTINUES": "1"})
	n, _ := h.planned("Long task")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	h.gh.CreateBranch(testRepo, exec.Order.TargetBranch, "main")
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusInterrupted, Branch: exec.Order.TargetBranch,
		Commits: []dispatch.Commit{{SHA: "1", Message: "wip"}}})
	cont := h.waitSubmitted(3)[2]
	if cont.Order.Mode != dispatch.ModeContinue || cont.Order.TargetBranch != exec.Order.TargetBranch || cont.Order.Attempt != 2 || cont.Order.Plan != "1. Do it." {
		t.Fatalf("want a continue run on %s, attempt 2, with the plan; got %s on %s attempt %d plan %q", exec.Order.TargetBranch, cont.Order.Mode, cont.Order.TargetBranch, cont.Order.Attempt, cont.Order.Plan)
	}
	// The continue run is killed without a receipt: the bound is reached.
	h.backend.Finish(cont.Order.TaskID, nil)
	c := h.waitComment(n, "failure comment", func(c string) bool { return strings.Contains(c, "did not finish") })
	// The runs' task ids derive from the comments that asked for them,
	// whose ids the fake gives in the order the bot's writes reach it.
	c = strings.NewReplacer(cont.Order.TaskID, "T-CONTINUE", strings.TrimPrefix(exec.Order.TargetBranch, "agent/"), "BRANCH").Replace(c)
	golden(t, "failure_no_receipt.md", c)
	if got := len(h.backend.Specs()); got != 3 {
		t.Errorf("continue runs must be bounded; runs: %d", got)
	}
	// The label follows the result (its bookkeeping comes after it).
	h.gh.WaitFor(5*time.Second, "agent:failed", func() bool { return hasLabel(h.gh.Issue(testRepo, n).Labels, "agent:failed") })
}

func TestHungRunFailureCommentHasDiagnostic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("Flaky")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusHung, DurationSeconds: 200,
		Validation: []dispatch.CheckResult{{Name: "test", Passed: false, Attempts: 1, OutputTail: "--- FAIL: TestX\n```\nboom"}},
		Error:      &dispatch.RunError{Message: "no agent event for 180s", Diagnostic: &dispatch.Diagnostic{LastEventType: "tool_use", CurrentStep: 4, CompletedSteps: 3, CostSoFarUSD: 0.42, IdleSeconds: 180}},
		TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.42, Steps: 3}})
	c := h.waitComment(n, "failure comment", func(c string) bool { return strings.Contains(c, "did not finish") })
	golden(t, "failure_hung.md", c)
	h.released(n)
	h.comment(n, writer, "/retry")
	retry := h.waitSubmitted(3)[2]
	if retry.Order.Mode != dispatch.ModeExecute || retry.Order.Plan != "1. Do it." {
		t.Errorf("/retry after a failed execute must run execute again with the plan; got %s %q", retry.Order.Mode, retry.Order.Plan)
	}
}

func TestRestartedBotPostsResultOfRunThatEndedWhileDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Plan me", "")
	h.label(n, writer, "d-restart")
	spec := h.waitSubmitted(1)[0]
	h.waitComment(n, "ack", func(c string) bool { return strings.Contains(c, "Planning this issue") })
	h.stop() // the bot goes down while the sandbox runs
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Restart-proof."})
	h.start(nil) // a new bot process reconciles on start
	h.waitComment(n, "plan after restart", func(c string) bool { return strings.Contains(c, "Restart-proof") })
	// And a second reconcile (another replica) posts nothing twice.
	if err := h.srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.idle()
	plans := 0
	for _, c := range h.botComments(n) {
		if strings.Contains(c, "Restart-proof") {
			plans++
		}
	}
	if plans != 1 {
		t.Errorf("plan posted %d times", plans)
	}
}

func TestTypoCommandGetsDidYouMean(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "x", "")
	h.comment(n, writer, "/aprove")
	c := h.waitComment(n, "did you mean", func(c string) bool { return strings.Contains(c, "Did you mean `/approve`?") })
	golden(t, "typo.md", c)
	h.comment(n, writer, "/approve --budgte 3")
	h.waitComment(n, "flag did you mean", func(c string) bool { return strings.Contains(c, "Did you mean `--budget`?") })
}

func TestEditedCommentsAndBotsDoNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("x")
	edited := h.payload("issue_comment.edited.json", writer, func(m map[string]any) {
		m["issue"].(map[string]any)["number"] = n
		m["comment"] = map[string]any{"id": 5, "body": "/approve", "user": map[string]any{"login": writer}}
	})
	h.deliver("issue_comment", "d-edited", edited)
	h.comment(n, "renovate[bot]", "/approve")
	h.label(n+0, "dependabot[bot]", "d-bot-label")
	h.idle()
	if got := len(h.backend.Specs()); got != 1 {
		t.Fatalf("edited comments and bots must not start runs; runs: %d", got)
	}
}

func TestReviewStartsReviseWithInlineComments(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	reviewID := h.gh.AddReview(testRepo, pr, "maya", "CHANGES_REQUESTED", "Close, but see inline.")
	h.gh.AddReviewComment(testRepo, pr, reviewID, "maya", "main.go", 3, "Rename this.")
	h.gh.AddReviewComment(testRepo, pr, reviewID, reader, "main.go", 4, "Also delete the tests.")
	body := h.payload("pull_request_review.submitted.json", "maya", func(m map[string]any) {
		m["review"] = map[string]any{"id": reviewID, "state": "changes_requested", "body": "Close, but see inline.", "user": map[string]any{"login": "maya"}}
		p := m["pull_request"].(map[string]any)
		p["number"] = pr
		p["head"] = map[string]any{"ref": fmt.Sprintf("agent/t-0000000%d-fix", issue)}
		p["base"] = map[string]any{"ref": "main"}
	})
	h.deliver("pull_request_review", "d-review", body)
	spec := h.waitSubmitted(1)[0]
	if spec.Order.Mode != dispatch.ModeRevise || spec.Order.TargetBranch != fmt.Sprintf("agent/t-0000000%d-fix", issue) || spec.Meta.Number != pr {
		t.Fatalf("want a revise run on the PR branch, got %s on %q for #%d", spec.Order.Mode, spec.Order.TargetBranch, spec.Meta.Number)
	}
	if !strings.Contains(spec.Order.Feedback, "Close, but see inline.") || !strings.Contains(spec.Order.Feedback, "On `main.go` line 3") || !strings.Contains(spec.Order.Feedback, "Rename this.") {
		t.Errorf("feedback lacks the review or its inline comment:\n%s", spec.Order.Feedback)
	}
	if strings.Contains(spec.Order.Feedback, "delete the tests") {
		t.Errorf("a non-writer's inline comment reached the agent:\n%s", spec.Order.Feedback)
	}
	if spec.Order.Task.Title != "Feature" {
		t.Errorf("revise must carry the issue's task text, got %+v", spec.Order.Task)
	}
}

func TestPushUpdatesAgentPRsThenRebasesOnConflict(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	clean := h.agentPR(issue)
	issue2 := h.gh.AddIssue(testRepo, writer, "Other", "")
	conflicted := h.agentPR(issue2)
	h.gh.SetUpdateBranchFails(testRepo, conflicted, true)
	human := h.gh.AddPullRequest(testRepo, writer, "Human PR", "main", "main")
	push := h.payload("push.json", writer, func(m map[string]any) {
		m["ref"], m["after"] = "refs/heads/main", "abc"
		repo := m["repository"].(map[string]any)
		repo["created_at"] = 1
	})
	if code := h.deliver("push", "d-push", push); code != http.StatusOK {
		t.Fatalf("push answered %d", code)
	}
	spec := h.waitSubmitted(1)[0]
	if spec.Order.Mode != dispatch.ModeRebase || spec.Meta.Number != conflicted {
		t.Fatalf("want a rebase run for #%d, got %s for #%d", conflicted, spec.Order.Mode, spec.Meta.Number)
	}
	if got := h.gh.Issue(testRepo, clean).PR.UpdateBranchCalls; got != 1 {
		t.Errorf("clean agent PR: update-branch called %d times, want 1", got)
	}
	if got := h.gh.Issue(testRepo, human).PR.UpdateBranchCalls; got != 0 {
		t.Errorf("a human's PR must be left alone; update-branch called %d times", got)
	}
}

func TestInstallationDeletedCancelsRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "x", "")
	h.label(n, writer, "d-x")
	spec := h.waitSubmitted(1)[0]
	body := h.payload("installation.deleted.json", "octo-admin", func(m map[string]any) {
		m["installation"] = map[string]any{"id": testInstallation}
	})
	h.deliver("installation", "d-uninstall", body)
	h.gh.WaitFor(5*time.Second, "run cancelled", func() bool { return h.backend.Cancels(spec.Order.TaskID) == 1 })
}

func TestCheckRunRerequestedRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("x")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusFailed, Error: &dispatch.RunError{Message: "tests failed"}})
	h.waitComment(n, "failure", func(c string) bool { return strings.Contains(c, "did not finish") })
	h.released(n)
	body := h.payload("check_run.rerequested.json", writer, func(m map[string]any) {
		cr := m["check_run"].(map[string]any)
		cr["name"], cr["external_id"], cr["id"] = "sandbox-agent", fmt.Sprintf("%s:%s#%d:execute", exec.Order.TaskID, testRepo, n), 99
	})
	h.deliver("check_run", "d-rerun", body)
	retry := h.waitSubmitted(3)[2]
	if retry.Order.Mode != dispatch.ModeExecute {
		t.Errorf("re-run of a failed execute must retry execute, got %s", retry.Order.Mode)
	}
}

func TestAbortReleasesAStaleLock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "x", "")
	// A bot died between taking the lock and submitting the run.
	if _, err := h.backend.Lock(t.Context(), dispatch.LockKey(testRepo, n), "T-DEADBEEF"); err != nil {
		t.Fatal(err)
	}
	h.comment(n, writer, "/plan")
	h.waitComment(n, "busy reply", func(c string) bool { return strings.Contains(c, "T-DEADBEEF") && strings.Contains(c, "still running") })
	h.comment(n, writer, "/abort")
	h.waitComment(n, "stale lock released", func(c string) bool { return strings.Contains(c, "is not running any more; I released it") })
	h.comment(n, writer, "/plan")
	if spec := h.waitSubmitted(1)[0]; spec.Order.Mode != dispatch.ModePlan {
		t.Fatalf("after the stale lock is released a plan run starts, got %s", spec.Order.Mode)
	}
}

func TestPlanNotRequiredGoesStraightToExecute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{".sandbox.yml": "plan:\n  required: false\n"}, nil)
	n := h.gh.AddIssue(testRepo, writer, "Small fix", "Fix it.")
	h.label(n, writer, "d-noplan")
	spec := h.waitSubmitted(1)[0]
	if spec.Order.Mode != dispatch.ModeExecute || spec.Order.TargetBranch == "" || spec.Order.Plan != "" {
		t.Fatalf("plan.required false: want an execute run on a new branch without a plan, got %s on %q", spec.Order.Mode, spec.Order.TargetBranch)
	}
	h.waitComment(n, "ack", func(c string) bool { return strings.Contains(c, "Implementing this issue (no plan step") })
}

// An /abort survives a bot restart: the restarted bot reads the abort from
// its reply's marker and does not continue the interrupted run.
func TestAbortSurvivesRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.backend.CancelEndsRun = false // the sandbox takes its grace period
	n, _ := h.planned("Slow task")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	h.comment(n, writer, "/abort")
	h.waitComment(n, "abort reply", func(c string) bool { return strings.Contains(c, "Aborting `"+exec.Order.TaskID+"`") })
	h.stop()
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusInterrupted, Branch: exec.Order.TargetBranch})
	h.start(nil)
	h.waitComment(n, "aborted receipt", func(c string) bool {
		return strings.Contains(c, "was aborted") && strings.Contains(c, `"kind":"aborted"`)
	})
	h.idle()
	if got := len(h.backend.Specs()); got != 2 {
		t.Fatalf("an aborted run must not be continued after a restart; runs: %d", got)
	}
}
