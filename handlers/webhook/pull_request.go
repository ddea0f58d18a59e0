package webhook

import (
	"context"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// autoReviewAction reports whether a pull_request action is one
// review.auto answers.
func autoReviewAction(action string) bool { return action == "opened" || action == "ready_for_review" }

// pullRequest hands the engine a person's pull request opened or marked
// ready for review (reviewed when the base branch's .sandbox.yml asks for
// it: review.auto), and any of the App's pull requests closed (the
// attempts' own branches go). Never a draft, never the App's own pull
// request, never a bot's.
func pullRequest(ctx context.Context, eng Engine, e *github.PullRequestEvent, deliveryID string) error {
	pr, repo := e.GetPullRequest(), e.GetRepo()
	installation := githubapp.GetInstallationIDFromEvent(e)
	d := handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Number: pr.GetNumber(), IsPR: true,
		Sender: pr.GetUser().GetLogin(), PR: pr}
	ours := strings.HasPrefix(pr.GetHead().GetRef(), dispatch.BranchPrefix)
	if e.GetAction() == "closed" && ours {
		return eng.Closed(ctx, d)
	}
	if !autoReviewAction(e.GetAction()) || pr.GetDraft() || eng.IgnoredSender(pr.GetUser()) || ours {
		return nil
	}
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, pr.GetNumber())
	return eng.Opened(ctx, d)
}
