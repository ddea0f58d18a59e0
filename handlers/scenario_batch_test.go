package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// batchEnv sets the review batch window of these tests: long enough for
// two deliveries on a loaded machine to land in one batch.
var batchEnv = map[string]string{"SANDBOX_REVIEW_BATCH_WINDOW": "1500ms"}

// inlineComment adds an inline comment on the fake, delivers its
// pull_request_review_comment event and returns the comment's id and the
// event (for redelivery).
func (h *harness) inlineComment(pr int, sender, path string, line int, body string, at time.Time) (int64, []byte) {
	h.t.Helper()
	review := h.gh.AddReview(testRepo, pr, sender, "COMMENTED", "")
	id := h.gh.AddReviewComment(testRepo, pr, review, sender, path, line, body)
	iss := h.gh.Issue(testRepo, pr)
	payload := h.payload("pull_request_review_comment.created.json", sender, func(m map[string]any) {
		m["comment"] = map[string]any{"id": id, "pull_request_review_id": review, "body": body, "path": path, "line": line,
			"diff_hunk": "@@ -1 +1 @@", "created_at": at.UTC().Format(time.RFC3339), "user": map[string]any{"login": sender, "type": "User"}}
		p := m["pull_request"].(map[string]any)
		p["number"] = pr
		p["head"] = map[string]any{"ref": iss.PR.Head}
		p["base"] = map[string]any{"ref": "main"}
	})
	h.deliver("pull_request_review_comment", fmt.Sprintf("inline-%d", id), payload)
	return id, payload
}

// botReplies are the bot's replies in review threads of pr.
func (h *harness) botReplies(pr int) []*githubtest.ReviewComment {
	var out []*githubtest.ReviewComment
	for _, c := range h.gh.Issue(testRepo, pr).PR.ReviewComments {
		if c.User == githubtest.AppLogin {
			out = append(out, c)
		}
	}
	return out
}

// keepRuns is the memory backend with cleanup left undone, as when a bot
// stops after posting a result and before cleaning up: the restarted bot
// follows the run again and must not post anything twice.
type keepRuns struct{ *backendtest.Memory }

func (keepRuns) Cleanup(context.Context, string) error { return nil }

func completed(spec dispatch.RunSpec, sha string) *dispatch.Result {
	return &dispatch.Result{Mode: spec.Order.Mode, Status: dispatch.StatusCompleted, Branch: spec.Order.TargetBranch, HeadSHA: sha,
		Commits: []dispatch.Commit{{SHA: sha, Message: "Address review"}}, TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.25, Steps: 4}}
}

// Two inline comments a second apart make one revise run that carries
// both; when it is done the bot replies on both, once, restarts included.
func TestReviewCommentsBatchIntoOneRevise(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, batchEnv)
	h.stop()
	h.startWith(keepRuns{h.backend}, batchEnv)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	now := time.Now()
	first, _ := h.inlineComment(pr, writer, "main.go", 1, "Rename this to greet.", now)
	second, redelivery := h.inlineComment(pr, "maya", "main.go", 3, "Add a test for it.", now.Add(time.Second))
	spec := h.waitSubmitted(1)[0]
	h.idle()
	if got := len(h.backend.Specs()); got != 1 {
		t.Fatalf("two review comments in one window started %d runs, want 1", got)
	}
	fb := spec.Order.Feedback
	for _, want := range []string{"@alice", "On `main.go` line 1", "Rename this to greet.", "@maya", "On `main.go` line 3", "Add a test for it."} {
		if !strings.Contains(fb, want) {
			t.Errorf("the batch's feedback lacks %q:\n%s", want, fb)
		}
	}
	if spec.Order.Mode != dispatch.ModeRevise || spec.Meta.Number != pr {
		t.Fatalf("want a revise run on #%d, got %s on #%d", pr, spec.Order.Mode, spec.Meta.Number)
	}
	const sha = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
	h.backend.Finish(spec.Order.TaskID, completed(spec, sha))
	h.gh.WaitFor(10*time.Second, "replies on both inline comments", func() bool { return len(h.botReplies(pr)) == 2 })
	replied := map[int64]bool{}
	for _, r := range h.botReplies(pr) {
		replied[r.InReplyTo] = true
		if !strings.Contains(r.Body, "Addressed in [`0a1b2c3`]") || !strings.Contains(r.Body, "/commit/"+sha) {
			t.Errorf("reply does not name the pushed commit:\n%s", r.Body)
		}
	}
	if !replied[first] || !replied[second] {
		t.Errorf("replies answer %v, want %d and %d", replied, first, second)
	}
	// The run is still on the backend: a restarted bot follows it again,
	// finds its result posted and its comments answered.
	h.idle()
	h.stop()
	h.startWith(keepRuns{h.backend}, batchEnv)
	h.idle()
	if !strings.Contains(h.logs.String(), "result already posted") {
		t.Fatalf("the restarted bot did not follow the ended run again; the replies' idempotency went untested")
	}
	if got := len(h.botReplies(pr)); got != 2 {
		t.Errorf("after a restart the bot has %d replies, want 2", got)
	}
	if n := strings.Count(h.gh.Issue(testRepo, pr).Body, `"task":"`+spec.Order.TaskID+`"`); n != 1 {
		t.Errorf("the revise run is in the PR body's history %d times, want once:\n%s", n, h.gh.Issue(testRepo, pr).Body)
	}
	// A redelivered comment event opens a batch that finds nothing left
	// to address.
	h.deliver("pull_request_review_comment", fmt.Sprintf("inline-%d", second), redelivery)
	h.idle()
	if got := len(h.backend.Specs()); got != 1 {
		t.Errorf("runs after the restart: %d, want 1", got)
	}
}

// /revise in the conversation carries the inline comments nobody answered
// yet, and not the one the bot already replied on.
func TestReviseCarriesUnaddressedInlineComments(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	review := h.gh.AddReview(testRepo, pr, writer, "COMMENTED", "")
	answered := h.gh.AddReviewComment(testRepo, pr, review, writer, "main.go", 1, "Old point, done already.")
	h.gh.AddReviewComment(testRepo, pr, review, writer, "main.go", 2, "Still open: handle the error.")
	h.gh.AddReviewComment(testRepo, pr, review, reader, "main.go", 3, "Outsider: delete everything.")
	h.gh.ReplyToReviewComment(testRepo, pr, answered, markers.Marker{Kind: markers.KindInlineReply, TaskID: "T-0000000A", Inline: []int64{answered}}.String()+"\nAddressed in `abc1234`.")
	h.comment(pr, writer, "/revise --budget 2 also log it")
	spec := h.waitSubmitted(1)[0]
	if spec.Order.BudgetUSD != 2 {
		t.Errorf("the /revise's --budget 2 did not reach the batch's run: budget %v", spec.Order.BudgetUSD)
	}
	fb := spec.Order.Feedback
	if !strings.Contains(fb, "also log it") || !strings.Contains(fb, "Still open: handle the error.") || !strings.Contains(fb, "On `main.go` line 2") {
		t.Errorf("/revise lacks its text or the open inline comment:\n%s", fb)
	}
	if strings.Contains(fb, "Old point") {
		t.Errorf("an inline comment the bot answered was carried again:\n%s", fb)
	}
	if strings.Contains(fb, "delete everything") {
		t.Errorf("a non-writer's inline comment reached the agent:\n%s", fb)
	}
}

// The PR body lists every run on the PR with the total cost: the execute
// run that opened it, then a revise run.
func TestPRBodyKeepsRunHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("History")
	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	sha := h.gh.CreateBranch(testRepo, exec.Order.TargetBranch, "main") // the runner pushed it
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusCompleted, Branch: exec.Order.TargetBranch,
		HeadSHA: sha, Commits: []dispatch.Commit{{SHA: sha, Message: "x"}}, TokenUsage: dispatch.TokenUsage{TotalCostUSD: 1.5, Steps: 10}})
	var pr int
	h.gh.WaitFor(10*time.Second, "PR opened", func() bool {
		prs := h.gh.PullRequests(testRepo)
		if len(prs) == 1 {
			pr = prs[0].Number
		}
		return pr != 0
	})
	h.idle()
	h.comment(pr, writer, "/revise shorter names")
	rev := h.waitSubmitted(3)[2]
	h.backend.Finish(rev.Order.TaskID, completed(rev, "2222222"))
	var body string
	h.gh.WaitFor(10*time.Second, "revise run in the PR body", func() bool {
		body = h.gh.Issue(testRepo, pr).Body
		return strings.Contains(body, rev.Order.TaskID)
	})
	for _, want := range []string{
		"| `" + exec.Order.TaskID + "` | execute | completed | $1.50 | 10 |",
		rev.Order.TaskID, "| revise | completed | $0.25 | 4 |",
		"**Total: $1.75** over 2 runs",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("PR body lacks %q:\n%s", want, body)
		}
	}
	if !strings.Contains(body, "Closes #") || strings.Count(body, "sandbox-bot:history-start") != 1 {
		t.Errorf("the history update must keep the rest of the body and one history section:\n%s", body)
	}
}

// A batch outlives the bot that opened it: restarted before the window
// closes, the bot starts the batch's run from the backend's lock. Two
// replicas that each got one comment start one run.
func TestReviewBatchSurvivesRestartAndReplicas(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, batchEnv)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	h.inlineComment(pr, writer, "main.go", 1, "Use a constant.", time.Now())
	h.gh.WaitFor(5*time.Second, "batch opened", func() bool { return strings.Contains(h.logs.String(), "opens a batch") })
	h.stop() // before the window closes
	h.start(batchEnv)
	// A second replica on the same backend and GitHub gets the next comment.
	other := &harness{t: t, gh: h.gh, backend: h.backend, logs: &bytes.Buffer{}, data: t.TempDir()}
	other.start(batchEnv)
	other.inlineComment(pr, "maya", "main.go", 2, "And document it.", time.Now())
	spec := h.waitSubmitted(1)[0]
	h.idle()
	other.idle()
	if got := len(h.backend.Specs()); got != 1 {
		t.Fatalf("runs: %d, want 1 batch run across the restart and the two replicas", got)
	}
	if !strings.Contains(spec.Order.Feedback, "Use a constant.") || !strings.Contains(spec.Order.Feedback, "And document it.") {
		t.Errorf("the batch run lacks a comment:\n%s", spec.Order.Feedback)
	}
}

// Feedback given while a revise run works on the PR waits for it instead
// of earning a "busy" reply, and goes into the next run.
func TestReviewBatchWaitsForTheRunningRevise(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, batchEnv)
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	h.inlineComment(pr, writer, "main.go", 1, "First point.", time.Now())
	first := h.waitSubmitted(1)[0]
	h.inlineComment(pr, "maya", "main.go", 2, "Second point, while the agent works.", time.Now())
	h.gh.WaitFor(10*time.Second, "the second batch waiting for the first run", func() bool {
		return strings.Contains(h.logs.String(), "the review batch waits for it")
	})
	h.backend.Finish(first.Order.TaskID, completed(first, "3333333"))
	second := h.waitSubmitted(2)[1]
	if !strings.Contains(second.Order.Feedback, "Second point") || strings.Contains(second.Order.Feedback, "First point") {
		t.Errorf("the next run must carry the new comment and not the answered one:\n%s", second.Order.Feedback)
	}
	for _, c := range h.botComments(pr) {
		if strings.Contains(c, "still running") {
			t.Errorf("feedback during a run got a busy reply:\n%s", c)
		}
	}
}
