package webhook

import (
	"context"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// push hands the engine a push to a branch that is not one of the App's:
// agent PRs that target it are kept current (an update through GitHub's
// API, a rebase run on a conflict), and a push to the default branch
// reads its routines again.
func push(ctx context.Context, eng Engine, e *github.PushEvent, deliveryID string) error {
	branch, isBranch := strings.CutPrefix(e.GetRef(), "refs/heads/")
	if !isBranch || e.GetDeleted() || strings.HasPrefix(branch, dispatch.BranchPrefix) {
		return nil
	}
	repo := pushRepo(e.GetRepo())
	installation := githubapp.GetInstallationIDFromEvent(e)
	ctx, _ = githubapp.PrepareRepoContext(ctx, installation, repo)
	return eng.Pushed(ctx, handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Sender: e.GetSender().GetLogin()}, branch, e.GetAfter())
}

// pushRepo converts the push event's repository shape to the common one.
func pushRepo(r *github.PushEventRepository) *github.Repository {
	return &github.Repository{
		ID: r.ID, Name: r.Name, FullName: r.FullName, DefaultBranch: r.DefaultBranch, CloneURL: r.CloneURL,
		Owner: &github.User{Login: github.String(strings.Split(r.GetFullName(), "/")[0])},
	}
}
