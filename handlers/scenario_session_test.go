package handlers_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
)

// A plan run that left its agent's session: the bot keeps the archive past
// the run's cleanup, and /approve hands it to the execute run in the work
// order; the PR body says the session was resumed.
func TestApproveHandsThePlanSessionToTheExecuteRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	archive, err := agentsession.Encode(agentsession.Manifest{TaskID: "T-00000000", Harness: "opencode", ID: "ses_plan", Dir: "/sandbox/work/repo"}, []byte(`{"info":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	n := h.gh.AddIssue(testRepo, writer, "Add caching", "Please do it.")
	h.label(n, writer, fmt.Sprintf("d-session-%d", time.Now().UnixNano()))
	plan := h.waitSubmitted(1)[0]
	h.backend.LeaveSession(plan.Order.TaskID, archive)
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Do it.",
		Session: &dispatch.SessionReport{Harness: "opencode", ID: "ses_plan", Archive: dispatch.SessionArchiveFile, ArchiveBytes: int64(len(archive)), Note: "saved for the execute run"}})
	h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	// The plan invites /approve as soon as it is posted: its session is
	// kept by then (an /approve that came as the plan run let go of the
	// issue started its execute run fresh).
	if _, err := h.backend.KeptSession(t.Context(), plan.Order.TaskID); err != nil {
		t.Fatalf("the plan is posted and its session is not kept: %v", err)
	}
	h.released(n)

	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	s := exec.Order.Session
	if s == nil || s.FromTask != plan.Order.TaskID || s.Harness != "opencode" || s.ID != "ses_plan" || !bytes.Equal(s.Archive, archive) || s.Missing != "" {
		t.Fatalf("execute work order's session = %+v, want the plan's archive", s)
	}
	// What the runner must find in the archive before it resumes it: this
	// repository, and the plan as the plan run wrote it.
	if s.RepoID == 0 || s.RepoID != exec.Order.RepoID || s.PlanSHA256 != agentsession.PlanDigest("1. Do it.") {
		t.Fatalf("the handoff binds the session to repository %d and plan %q; want %d and the plan's digest", s.RepoID, s.PlanSHA256, exec.Order.RepoID)
	}
	h.gh.CreateBranch(testRepo, exec.Order.TargetBranch, "main")
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusCompleted, Branch: exec.Order.TargetBranch,
		PRSummary: "Done.", Commits: []dispatch.Commit{{SHA: strings.Repeat("a", 40), Message: "Add caching"}}, Session: &dispatch.SessionReport{Resumed: true, From: plan.Order.TaskID, Note: "resumed from plan " + plan.Order.TaskID}})
	h.gh.WaitFor(30*time.Second, "the PR", func() bool { return len(h.gh.PullRequests(testRepo)) == 1 })
	body := h.gh.PullRequests(testRepo)[0].Body
	if !strings.Contains(body, "| Agent session | resumed from the plan run `"+plan.Order.TaskID+"` |") {
		t.Fatalf("PR body does not say the session was resumed:\n%s", body)
	}
}

// A plan run that left no session (or whose archive was not kept): the
// execute run is told why, and starts fresh.
func TestApproveWithoutAKeptSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, planTask := h.planned("Add caching")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	if s := exec.Order.Session; s == nil || s.FromTask != planTask || len(s.Archive) != 0 || !strings.Contains(s.Missing, "no agent session of the plan run "+planTask) {
		t.Fatalf("execute work order's session = %+v", s)
	}
}
