package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// PullRequestReview puts a writer's review of an agent PR (changes
// requested, or a review with a body) into the PR's review batch, whose
// revise run starts when the batch's window closes (batch.go) and takes
// the review's body and inline comments along.
type PullRequestReview struct{ b *Base }

var _ githubapp.EventHandler = &PullRequestReview{}

// Handles implements githubapp.EventHandler.
func (h *PullRequestReview) Handles() []string { return []string{"pull_request_review"} }

// Handle implements githubapp.EventHandler.
func (h *PullRequestReview) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.PullRequestReviewEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse pull_request_review event: %w", err)
	}
	review, pr, repo := e.GetReview(), e.GetPullRequest(), e.GetRepo()
	if e.GetAction() != "submitted" || h.b.gate.isIgnoredSender(e.GetSender()) {
		return nil
	}
	// Approvals ask for nothing; a bare "commented" review is the wrapper
	// of inline comments, which their own events bring.
	state := strings.ToLower(review.GetState())
	if state == "approved" || state != "changes_requested" && strings.TrimSpace(review.GetBody()) == "" {
		return nil
	}
	if !strings.HasPrefix(pr.GetHead().GetRef(), dispatch.BranchPrefix) {
		return nil
	}
	return h.b.feedbackOnPR(ctx, githubapp.GetInstallationIDFromEvent(&e), repo, pr.GetNumber(), e.GetSender().GetLogin(), deliveryID,
		review.GetBody(), "review-"+strconv.FormatInt(review.GetID(), 10), 0)
}

// feedbackOnPR hands the table what a person wrote on a pull request in a
// review (its body, an inline comment): a command other than /revise is
// that command, and the rest is feedback for the review batch (batch.go).
// thread is the review thread an inline comment is in (its first
// comment's id; 0 for a review's body).
func (b *Base) feedbackOnPR(ctx context.Context, installation int64, repo *github.Repository, number int, sender, deliveryID, body, trigger string, thread int64) error {
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, number)
	t, err := b.thread(installation, repo, number, true)
	if err != nil {
		return err
	}
	t.sender, t.deliveryID = sender, deliveryID
	ev := event{kind: lifecycle.Review, trigger: trigger}
	if cmd, perr := commands.ParseCommand(body); perr != nil || cmd != nil {
		ev = commandEvent(cmd, perr, trigger)
	}
	ev.thread = thread
	_, err = b.on(ctx, t, ev)
	return err
}

// inlineContext is where an inline comment sits, for the agent.
func inlineContext(path string, line int, hunk string) string {
	if path == "" {
		return ""
	}
	s := fmt.Sprintf("On `%s`", path)
	if line > 0 {
		s += fmt.Sprintf(" line %d", line)
	}
	s += ":\n"
	if hunk != "" {
		s += "```diff\n" + hunk + "\n```\n"
	}
	return s
}
