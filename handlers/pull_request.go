package handlers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// PullRequest cleans up after an agent PR that several attempts competed
// for (/approve --attempts N): when it is merged or closed, the attempts'
// own branches are deleted (attemptSets.dropBranches).
type PullRequest struct{ b *Base }

var _ githubapp.EventHandler = &PullRequest{}

// Handles implements githubapp.EventHandler.
func (h *PullRequest) Handles() []string { return []string{"pull_request"} }

// Handle implements githubapp.EventHandler.
func (h *PullRequest) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.PullRequestEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse pull_request event: %w", err)
	}
	if e.GetAction() == "closed" {
		return h.b.Runs.sets.dropBranches(ctx, &e, deliveryID)
	}
	return nil
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
	gh, err := r.c.hub.Repo(githubapp.GetInstallationIDFromEvent(e), e.GetRepo().GetFullName())
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
