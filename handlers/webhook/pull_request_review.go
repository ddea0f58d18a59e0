package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// PullRequestReview hands the engine a writer's review of an agent PR
// (changes requested, or a review with a body): it goes into the PR's
// review batch, whose revise run starts when the batch's window closes
// and takes the review's body and inline comments along.
type PullRequestReview struct{ e Engine }

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
	if e.GetAction() != "submitted" || h.e.IgnoredSender(e.GetSender()) {
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
	installation := githubapp.GetInstallationIDFromEvent(&e)
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, pr.GetNumber())
	return h.e.Feedback(ctx, handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Number: pr.GetNumber(), IsPR: true,
		Sender: e.GetSender().GetLogin()}, review.GetBody(), "review-"+strconv.FormatInt(review.GetID(), 10), 0)
}
