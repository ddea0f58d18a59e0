package handlers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
)

// PullRequestReviewComment handles inline review comments on agent PRs. A
// plain comment is collected into the next revise (its review, or a later
// /revise, picks it up); an inline comment that is a command, such as
// "/revise use a map here", runs it with the file and line as context.
type PullRequestReviewComment struct{ *Base }

var _ githubapp.EventHandler = &PullRequestReviewComment{}

// Handles implements githubapp.EventHandler.
func (h *PullRequestReviewComment) Handles() []string {
	return []string{"pull_request_review_comment"}
}

// Handle implements githubapp.EventHandler.
func (h *PullRequestReviewComment) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event github.PullRequestReviewCommentEvent
	if err := json.Unmarshal(payload, &event); err != nil {
		return fmt.Errorf("parse pull_request_review_comment event: %w", err)
	}
	if event.GetAction() != "created" || h.isIgnoredSender(event.GetSender()) {
		return nil
	}
	comment, pr, repo := event.GetComment(), event.GetPullRequest(), event.GetRepo()
	installationID := githubapp.GetInstallationIDFromEvent(&event)
	ctx, log := githubapp.PreparePRContext(ctx, installationID, repo, pr.GetNumber())
	cmd, perr := ParseCommand(comment.GetBody())
	if cmd == nil && perr == nil {
		log.Debug().Int64("comment_id", comment.GetID()).Msg("inline comment collected for the next revise")
		return nil
	}
	client, err := h.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	return h.command(ctx, client, commandContext{
		installationID: installationID, repo: repo, number: pr.GetNumber(), isPR: true,
		sender: event.GetSender().GetLogin(), deliveryID: deliveryID,
		reviewContext: inlineContext(comment.GetPath(), comment.GetLine(), comment.GetDiffHunk()),
	}, cmd, perr)
}
