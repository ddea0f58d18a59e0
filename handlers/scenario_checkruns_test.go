package handlers_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// With OAuth and a public URL, the dashboard is public and check runs link
// to it.
var dashboardEnv = map[string]string{
	"SANDBOX_PUBLIC_URL": "https://bot.example", "GITHUB_OAUTH_CLIENT_ID": "Iv1.x", "GITHUB_OAUTH_CLIENT_SECRET": "oauth-secret",
}

// livePage is where a run's check run links: its live page.
const livePage = "https://bot.example/runs/"

// checkOf returns the run's check runs (by their dashboard link), oldest
// first.
func (h *harness) checksOf(taskID string) []githubtest.CheckRun {
	var out []githubtest.CheckRun
	for _, c := range h.gh.CheckRuns(testRepo) {
		if c.DetailsURL == livePage+taskID {
			out = append(out, c)
		}
	}
	return out
}

func (h *harness) waitCheck(what, taskID string, cond func(cs []githubtest.CheckRun) bool) []githubtest.CheckRun {
	h.t.Helper()
	var cs []githubtest.CheckRun
	h.t.Cleanup(func() {
		if h.t.Failed() {
			h.t.Logf("check runs: %+v\nlogs:\n%s", h.gh.CheckRuns(testRepo), h.logs.String())
		}
	})
	h.gh.WaitFor(10*time.Second, what, func() bool { cs = h.checksOf(taskID); return cond(cs) })
	return cs
}

// receipt reads the run's receipt from the bot's store, as the dashboard
// does.
func (h *harness) receipt(taskID string) receipts.Run {
	h.t.Helper()
	st, err := receipts.OpenSQLite(filepath.Join(h.data, "receipts"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	var p receipts.Page
	h.gh.WaitFor(10*time.Second, "the receipt of "+taskID+" in the store", func() bool {
		p, err = st.List(context.Background(), receipts.Filter{TaskID: taskID}, 0, 1)
		return err == nil && len(p.Runs) == 1
	})
	return p.Runs[0]
}

// A revise run on a PR shows on the PR's head from its start, follows the
// branch as the run pushes, and ends with the receipt's figures and the
// dashboard link; the receipt is kept.
func TestReviseRunReportsOnThePRHeadCheckRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, dashboardEnv)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	branch := h.gh.Issue(testRepo, pr).PR.Head
	head := h.gh.BranchSHA(testRepo, branch)
	h.comment(pr, writer, "/revise make it blue")
	spec := h.waitSubmitted(1)[0]
	if spec.Order.Mode != dispatch.ModeRevise {
		t.Fatalf("want a revise run, got %s", spec.Order.Mode)
	}
	id := spec.Order.TaskID
	// Before the sandbox reports anything, the PR's head shows the run.
	cs := h.waitCheck("check run on the PR head at start", id, func(cs []githubtest.CheckRun) bool { return len(cs) == 1 })
	if cs[0].HeadSHA != head || cs[0].Status != "in_progress" || !strings.Contains(cs[0].Text, id) {
		t.Errorf("first check run: %+v; want in_progress on the PR head %s naming %s", cs[0], head, id)
	}
	// Steps and cost so far.
	h.backend.Emit(id, dispatch.Progress{Stage: "agent", Message: "edit main.go", Step: 3, ToolCalls: 2, CostUSD: 0.12})
	cs = h.waitCheck("progress on the check run", id, func(cs []githubtest.CheckRun) bool {
		return len(cs) == 1 && strings.Contains(cs[0].Text, "edit main.go")
	})
	if !strings.Contains(cs[0].Text, "step 3") || !strings.Contains(cs[0].Text, "$0.12") || !strings.Contains(cs[0].Text, "`queued`") ||
		!strings.Contains(cs[0].Text, livePage+id) {
		t.Errorf("check run text lacks the steps so far, the cost or the dashboard link:\n%s", cs[0].Text)
	}
	// The run pushes: the progress moves to the new head.
	pushed := h.gh.CommitFile(testRepo, branch, "blue.txt", "blue\n", "Make it blue")
	h.backend.Emit(id, dispatch.Progress{Stage: "push", Message: "pushed " + branch, Branch: branch, HeadSHA: pushed, Step: 4, CostUSD: 0.2})
	cs = h.waitCheck("a check run on the pushed head", id, func(cs []githubtest.CheckRun) bool {
		return len(cs) == 2 && cs[0].Status == "completed" && cs[1].HeadSHA == pushed
	})
	if cs[0].Conclusion != "neutral" || !strings.Contains(cs[0].Title, "Superseded") {
		t.Errorf("the check run left on the old head: %+v; want completed neutral, superseded", cs[0])
	}
	h.backend.Finish(id, &dispatch.Result{Mode: dispatch.ModeRevise, Status: dispatch.StatusCompleted, Branch: branch, HeadSHA: pushed,
		Commits: []dispatch.Commit{{SHA: pushed, Message: "Make it blue"}}, DurationSeconds: 42,
		TokenUsage: dispatch.TokenUsage{Input: 1000, Output: 200, TotalCostUSD: 0.31, Steps: 6}})
	cs = h.waitCheck("the check run completed", id, func(cs []githubtest.CheckRun) bool {
		return len(cs) == 2 && cs[1].Status == "completed"
	})
	if cs[1].Conclusion != "success" || !strings.Contains(cs[1].Text, "$0.31") || !strings.Contains(cs[1].Text, "| Steps | 6 |") ||
		!strings.Contains(cs[1].Text, livePage+id) {
		t.Errorf("final check run: %+v\n%s\nwant success with the receipt's cost, steps and the dashboard link", cs[1], cs[1].Text)
	}
	r := h.receipt(id)
	if r.Repo != testRepo || r.Number != pr || r.Issue != issue || r.Mode != "revise" || r.Status != "completed" || r.CostUSD != 0.31 ||
		r.DurationSeconds != 42 || r.Steps != 6 || r.Branch != branch || !strings.HasSuffix(r.URL, "/"+testRepo+"/issues/"+strconv.Itoa(pr)) {
		t.Errorf("stored receipt %+v: want the revise run's figures, linked to PR #%d", r, pr)
	}
	// The usage page's: who asked, the model, a cost that was reported.
	if r.Requester != writer || r.Model != "scripted/model" || r.CostUnknown {
		t.Errorf("stored receipt asked by %q on %q, cost unknown %v; want %s on scripted/model, known", r.Requester, r.Model, r.CostUnknown, writer)
	}
}

// A sandbox rebase of a conflicted PR reports on the PR's head too.
func TestRebaseRunReportsOnThePRHeadCheckRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, dashboardEnv)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	h.gh.SetUpdateBranchFails(testRepo, pr, true)
	head := h.gh.BranchSHA(testRepo, h.gh.Issue(testRepo, pr).PR.Head)
	push := h.payload("push.json", writer, func(m map[string]any) {
		m["ref"], m["after"] = "refs/heads/main", "abc"
		m["repository"].(map[string]any)["created_at"] = 1
	})
	if code := h.deliver("push", "d-push-check", push); code != http.StatusOK {
		t.Fatalf("push answered %d", code)
	}
	spec := h.waitSubmitted(1)[0]
	if spec.Order.Mode != dispatch.ModeRebase {
		t.Fatalf("want a rebase run, got %s", spec.Order.Mode)
	}
	cs := h.waitCheck("check run on the PR head at start", spec.Order.TaskID, func(cs []githubtest.CheckRun) bool { return len(cs) == 1 })
	if cs[0].HeadSHA != head || cs[0].Status != "in_progress" {
		t.Errorf("rebase check run %+v, want in_progress on %s", cs[0], head)
	}
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeRebase, Status: dispatch.StatusFailed,
		Error: &dispatch.RunError{Message: "conflict in main.go"}, TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.05}})
	cs = h.waitCheck("the rebase check run completed", spec.Order.TaskID, func(cs []githubtest.CheckRun) bool {
		return len(cs) == 1 && cs[0].Status == "completed"
	})
	if cs[0].Conclusion != "failure" {
		t.Errorf("failed rebase: check run %+v, want failure", cs[0])
	}
	if r := h.receipt(spec.Order.TaskID); r.Status != "failed" || r.Mode != "rebase" || r.Error != "conflict in main.go" {
		t.Errorf("stored receipt %+v: want a failed rebase with its error", r)
	}
}

// An execute run's continuation reports on the branch head once it is
// known, with its own check run and dashboard entry.
func TestContinueRunReportsOnTheBranchHead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, dashboardEnv)
	n, _ := h.planned("Long task")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	sha := h.gh.CreateBranch(testRepo, exec.Order.TargetBranch, "main")
	h.backend.Emit(exec.Order.TaskID, dispatch.Progress{Stage: "push", Message: "pushed", HeadSHA: sha, Branch: exec.Order.TargetBranch})
	h.waitCheck("the execute run's check run", exec.Order.TaskID, func(cs []githubtest.CheckRun) bool { return len(cs) == 1 && cs[0].HeadSHA == sha })
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusInterrupted, Branch: exec.Order.TargetBranch,
		HeadSHA: sha, Commits: []dispatch.Commit{{SHA: sha, Message: "wip"}}, TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.4}})
	cont := h.waitSubmitted(3)[2]
	if cont.Order.Mode != dispatch.ModeContinue {
		t.Fatalf("want a continue run, got %s", cont.Order.Mode)
	}
	h.backend.Emit(cont.Order.TaskID, dispatch.Progress{Stage: "agent", Message: "resuming", Step: 1, CostUSD: 0.01, HeadSHA: sha})
	cs := h.waitCheck("the continue run's check run", cont.Order.TaskID, func(cs []githubtest.CheckRun) bool { return len(cs) == 1 })
	if cs[0].HeadSHA != sha || cs[0].Status != "in_progress" || !strings.Contains(cs[0].Text, "resuming") {
		t.Errorf("continue check run %+v, want in_progress on %s with its steps", cs[0], sha)
	}
	if r := h.receipt(exec.Order.TaskID); r.Status != "interrupted" || r.CostUSD != 0.4 {
		t.Errorf("the interrupted execute run's receipt %+v: want interrupted, $0.40", r)
	}
}

// A bot restarted while a PR run goes on keeps reporting on the run's
// check run instead of opening a second one.
func TestRestartedBotKeepsOneCheckRunPerRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, dashboardEnv)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	h.comment(pr, writer, "/revise make it blue")
	id := h.waitSubmitted(1)[0].Order.TaskID
	h.waitCheck("check run at start", id, func(cs []githubtest.CheckRun) bool { return len(cs) == 1 })
	h.stop()
	h.start(dashboardEnv)
	h.backend.Emit(id, dispatch.Progress{Stage: "agent", Message: "after the restart", Step: 2, CostUSD: 0.02})
	h.waitCheck("progress after the restart", id, func(cs []githubtest.CheckRun) bool {
		return len(cs) >= 1 && strings.Contains(cs[len(cs)-1].Text, "after the restart")
	})
	h.backend.Finish(id, &dispatch.Result{Mode: dispatch.ModeRevise, Status: dispatch.StatusFailed, Error: &dispatch.RunError{Message: "tests fail"}})
	cs := h.waitCheck("the check run completed", id, func(cs []githubtest.CheckRun) bool { return len(cs) >= 1 && cs[len(cs)-1].Status == "completed" })
	h.idle()
	if cs = h.checksOf(id); len(cs) != 1 || cs[0].Conclusion != "failure" {
		t.Errorf("check runs of the run across a restart: %+v; want one, completed as failure", cs)
	}
}

// TestAcknowledgementAndStatusLinkTheLivePage: with the bot's pages served,
// the acknowledgement and /status link the run's live page, as the check
// run's Details do.
func TestAcknowledgementAndStatusLinkTheLivePage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, dashboardEnv)
	n := h.gh.AddIssue(testRepo, writer, "Add caching", "")
	h.label(n, writer, "d-live-links")
	id := h.waitSubmitted(1)[0].Order.TaskID
	h.waitComment(n, "the acknowledgement's link", func(c string) bool { return strings.Contains(c, "[watch it live]("+livePage+id+")") })
	h.comment(n, reader, "/status")
	h.waitComment(n, "the status's link", func(c string) bool { return strings.Contains(c, "Live page: "+livePage+id) })
}

// A run whose result names no cost (a command harness, a model without a
// price) is kept as of unknown cost, not as $0, with who asked for it.
func TestReceiptOfAnUnpricedRunIsOfUnknownCost(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := newIssues(h, 1)[0]
	h.label(n, writer, "d-unpriced")
	spec := h.waitSubmitted(1)[0]
	h.backend.Finish(spec.Order.TaskID, planDone(spec.Order.TaskID))
	if r := h.receipt(spec.Order.TaskID); !r.CostUnknown || r.CostUSD != 0 || r.Requester != writer || r.Model != "scripted/model" || r.Mode != "plan" {
		t.Errorf("the unpriced plan's receipt %+v: want of unknown cost, asked by %s on scripted/model", r, writer)
	}
}
