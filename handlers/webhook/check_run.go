package webhook

import (
	"context"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// checkRun hands the engine a writer's "Re-run" on a run's check run: the
// run, again.
func checkRun(ctx context.Context, eng Engine, e *github.CheckRunEvent, deliveryID string) error {
	run := e.GetCheckRun()
	if e.GetAction() != "rerequested" || run.GetName() != eng.CheckName() || eng.IgnoredSender(e.GetSender()) {
		return nil
	}
	return eng.Rerun(ctx, handlers.Delivery{ID: deliveryID, Installation: githubapp.GetInstallationIDFromEvent(e), Repo: e.GetRepo(),
		Sender: e.GetSender().GetLogin(), CommentID: run.GetID()}, run.GetExternalID())
}
