package webhook

import (
	"context"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// issues hands the engine a writer's trigger label on an issue: a plan
// run.
func issues(ctx context.Context, eng Engine, e *github.IssuesEvent, deliveryID string) error {
	if e.GetAction() != "labeled" || e.GetLabel().GetName() != eng.TriggerLabel() {
		return nil
	}
	repo, issue := e.GetRepo(), e.GetIssue()
	installation := githubapp.GetInstallationIDFromEvent(e)
	ctx, log := githubapp.PrepareRepoContext(ctx, installation, repo)
	ctx = log.With().Int("issue", issue.GetNumber()).Logger().WithContext(ctx)
	if eng.IgnoredSender(e.GetSender()) {
		log.Debug().Str("sender", e.GetSender().GetLogin()).Msg("ignoring bot")
		return nil
	}
	return eng.Label(ctx, handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Number: issue.GetNumber(),
		Sender: e.GetSender().GetLogin(), Issue: issue})
}
