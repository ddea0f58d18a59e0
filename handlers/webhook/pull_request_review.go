package webhook

import (
	"context"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// pullRequestReview hands the engine a writer's review of an agent PR
// (changes requested, or a review with a body): it goes into the PR's
// review batch, whose revise run starts when the batch's window closes
// and takes the review's body and inline comments along.
func pullRequestReview(ctx context.Context, eng Engine, e *github.PullRequestReviewEvent, deliveryID string) error {
	review, pr, repo := e.GetReview(), e.GetPullRequest(), e.GetRepo()
	if e.GetAction() != "submitted" || eng.IgnoredSender(e.GetSender()) {
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
	installation := githubapp.GetInstallationIDFromEvent(e)
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, pr.GetNumber())
	return eng.Feedback(ctx, handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Number: pr.GetNumber(), IsPR: true,
		Sender: e.GetSender().GetLogin()}, review.GetBody(), "review-"+strconv.FormatInt(review.GetID(), 10), 0)
}
