package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// GitHub redelivers the very payload it sent first. After the first run
// ended, its result was posted and the run was cleaned up from the backend,
// and the bot restarted (its delivery cache gone), the redelivery must be
// recognised from the task's marker on GitHub: no second run, no reply.
func TestRedeliveryAfterRestartAndCleanupStartsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Plan me once", "")
	labeled := h.payload("issues.labeled.json", writer, func(m map[string]any) {
		m["label"] = map[string]any{"name": "agent"}
		issue := m["issue"].(map[string]any)
		issue["number"], issue["title"], issue["body"], issue["labels"] = n, "Plan me once", "", []any{}
	})
	if code := h.deliver("issues", "d-once", labeled); code != http.StatusOK {
		t.Fatalf("label delivery answered %d", code)
	}
	spec := h.waitSubmitted(1)[0]
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Once."})
	h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "1. Once.") })
	h.gh.WaitFor(5*time.Second, "run cleaned up from the backend", func() bool {
		runs, err := h.backend.List(t.Context())
		return err == nil && len(runs) == 0 && h.backend.LockHolder(dispatch.LockKey(testRepo, n)) == ""
	})
	comments := len(h.gh.Issue(testRepo, n).Comments)

	h.stop()
	h.start(nil)
	if code := h.deliver("issues", "d-once", labeled); code != http.StatusOK {
		t.Fatalf("redelivery answered %d", code)
	}
	h.idle()
	h.wantRuns(1, "a redelivered label after restart and cleanup")
	if got := len(h.gh.Issue(testRepo, n).Comments); got != comments {
		t.Errorf("the redelivery added %d comments", got-comments)
	}
}

// The same for a command: an /approve redelivered after its execute run
// opened the PR, was cleaned up and the bot restarted starts nothing.
func TestRedeliveredApproveAfterRestartAndCleanupStartsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("Approve once")
	id, approve := h.commentEvent(n, writer, "/approve")
	delivery := fmt.Sprintf("comment-%d", id)
	if code := h.deliver("issue_comment", delivery, approve); code != http.StatusOK {
		t.Fatalf("/approve answered %d", code)
	}
	exec := h.waitSubmitted(2)[1]
	sha := h.gh.CreateBranch(testRepo, exec.Order.TargetBranch, "main")
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusCompleted, Branch: exec.Order.TargetBranch,
		HeadSHA: sha, Commits: []dispatch.Commit{{SHA: sha, Message: "Do it"}}, PRSummary: "Done."})
	h.waitComment(n, "PR link", func(c string) bool { return strings.Contains(c, "🚀 Opened") })
	h.gh.WaitFor(5*time.Second, "execute run cleaned up", func() bool {
		runs, err := h.backend.List(t.Context())
		return err == nil && len(runs) == 0
	})
	comments := len(h.gh.Issue(testRepo, n).Comments)

	h.stop()
	h.start(nil)
	if code := h.deliver("issue_comment", delivery, approve); code != http.StatusOK {
		t.Fatalf("redelivery answered %d", code)
	}
	h.idle()
	h.wantRuns(2, "a redelivered /approve after restart and cleanup")
	if got := len(h.gh.Issue(testRepo, n).Comments); got != comments {
		t.Errorf("the redelivery added %d comments", got-comments)
	}
	if prs := h.gh.PullRequests(testRepo); len(prs) != 1 {
		t.Errorf("want one PR, got %d", len(prs))
	}
}
