package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// PullRequest hands the engine a person's pull request opened or marked
// ready for review (reviewed when the base branch's .sandbox.yml asks for
// it: review.auto), and any of the App's pull requests closed (the
// attempts' own branches go). Never a draft, never the App's own pull
// request, never a bot's.
type PullRequest struct{ e Engine }

var _ githubapp.EventHandler = &PullRequest{}

// Handles implements githubapp.EventHandler.
func (h *PullRequest) Handles() []string { return []string{"pull_request"} }

// autoReviewAction reports whether a pull_request action is one
// review.auto answers.
func autoReviewAction(action string) bool { return action == "opened" || action == "ready_for_review" }

// Handle implements githubapp.EventHandler.
func (h *PullRequest) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.PullRequestEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse pull_request event: %w", err)
	}
	pr, repo := e.GetPullRequest(), e.GetRepo()
	installation := githubapp.GetInstallationIDFromEvent(&e)
	d := handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Number: pr.GetNumber(), IsPR: true,
		Sender: pr.GetUser().GetLogin(), PR: pr}
	ours := strings.HasPrefix(pr.GetHead().GetRef(), dispatch.BranchPrefix)
	if e.GetAction() == "closed" && ours {
		return h.e.Closed(ctx, d)
	}
	if !autoReviewAction(e.GetAction()) || pr.GetDraft() || h.e.IgnoredSender(pr.GetUser()) || ours {
		return nil
	}
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, pr.GetNumber())
	return h.e.Opened(ctx, d)
}
