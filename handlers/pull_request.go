package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// PullRequest reviews a pull request as it is opened or marked ready for
// review when the base branch's .sandbox.yml asks for it (review.auto):
// the event is /review's, asked for by the pull request's author, once per
// head (its task id derives from the head). Never a draft, never the
// App's own pull request, and never one whose author cannot write to the
// repository: what such a person opens is reviewed when a writer asks.
// When the App's own PR that several attempts competed for (/approve
// --attempts N) is merged or closed, the attempts' own branches are
// deleted (attemptSets.dropBranches).
type PullRequest struct{ b *Base }

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
	if e.GetAction() == "closed" {
		return h.b.Runs.sets.dropBranches(ctx, &e, deliveryID)
	}
	pr, repo := e.GetPullRequest(), e.GetRepo()
	author := pr.GetUser()
	if !autoReviewAction(e.GetAction()) || pr.GetDraft() || h.b.gate.isIgnoredSender(author) || strings.HasPrefix(pr.GetHead().GetRef(), dispatch.BranchPrefix) {
		return nil
	}
	installation := githubapp.GetInstallationIDFromEvent(&e)
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, pr.GetNumber())
	t, err := h.b.thread(installation, repo, pr.GetNumber(), true)
	if err != nil {
		return err
	}
	cfg, err := h.b.c.loadConfig(ctx, installation, t.gh, pr.GetBase().GetRef(), sandboxcfg.Flags{})
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) || err == nil && !cfg.Review.Auto {
		return nil // an invalid configuration is reported where a person asks
	}
	if err != nil {
		return err
	}
	if ok, err := h.b.c.canWrite(ctx, t.gh, author.GetLogin()); err != nil || !ok {
		if err == nil {
			zerolog.Ctx(ctx).Info().Str("author", author.GetLogin()).Msg("review.auto: the pull request's author cannot write here; no review unless a writer asks")
		}
		return err
	}
	t.sender, t.deliveryID, t.pr = author.GetLogin(), deliveryID, pr
	_, err = h.b.on(ctx, t, event{kind: lifecycle.AskReview, trigger: "head-" + pr.GetHead().GetSHA()})
	return err
}

// dropBranches deletes the attempts' own branches of the approval whose
// PR e closed (merged or not); the PR's branch is left to GitHub's
// setting. A PR that is not the App's, or no approval's, is left alone.
func (r *attemptSets) dropBranches(ctx context.Context, e *github.PullRequestEvent, deliveryID string) error {
	pr := e.GetPullRequest()
	login, err := r.c.LoadIdentity(ctx)
	if err != nil {
		return err
	}
	if _, ours := isAgentPR(pr, login); !ours {
		return nil
	}
	m, ok := attemptsOf(pr.GetBody())
	if !ok {
		return nil
	}
	gh, err := r.c.Hub.Repo(githubapp.GetInstallationIDFromEvent(e), e.GetRepo().GetFullName())
	if err != nil {
		return err
	}
	log := zerolog.Ctx(ctx).With().Str("delivery_id", deliveryID).Str("repo", e.GetRepo().GetFullName()).Int("pr", pr.GetNumber()).Str("set", m.TaskID).Logger()
	// The names come from the approval's id, never from the body's text:
	// only the bot's own attempt branches can go.
	for _, row := range m.Attempts {
		branch := attemptBranch(m.TaskID, row.K)
		if branch == pr.GetHead().GetRef() {
			continue
		}
		if err := gh.DeleteRef(ctx, "refs/heads/"+branch); err != nil {
			log.Warn().Err(err).Str("branch", branch).Msg("delete an attempt's branch")
			continue
		}
		log.Info().Str("branch", branch).Bool("merged", pr.GetMerged()).Msg("deleted an attempt's branch: its PR is closed")
	}
	return nil
}
