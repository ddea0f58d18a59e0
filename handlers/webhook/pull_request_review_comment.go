package webhook

import (
	"cmp"
	"context"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
)

// pullRequestReviewComment hands the engine inline review comments. On an
// agent PR a writer's comment (plain, or "/revise use a map here") goes
// into the PR's review batch with its file and line, and the revise run
// replies on it when it is done; a command typed inline runs as one, on
// any pull request.
func pullRequestReviewComment(ctx context.Context, eng Engine, e *github.PullRequestReviewCommentEvent, deliveryID string) error {
	if e.GetAction() != "created" || eng.IgnoredSender(e.GetSender()) {
		return nil
	}
	comment, pr, repo := e.GetComment(), e.GetPullRequest(), e.GetRepo()
	// Conversation on other PRs is none of the bot's business; a command
	// there still gets its answer (the table says where it applies).
	if cmd, perr := commands.ParseCommand(comment.GetBody()); cmd == nil && perr == nil && !strings.HasPrefix(pr.GetHead().GetRef(), dispatch.BranchPrefix) {
		return nil
	}
	installation := githubapp.GetInstallationIDFromEvent(e)
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, pr.GetNumber())
	return eng.Feedback(ctx, handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Number: pr.GetNumber(), IsPR: true,
		Sender: e.GetSender().GetLogin()}, comment.GetBody(), "inline-"+strconv.FormatInt(comment.GetID(), 10), cmp.Or(comment.GetInReplyTo(), comment.GetID()))
}
