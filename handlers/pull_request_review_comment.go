package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
)

// PullRequestReviewComment handles inline review comments on agent PRs. A
// writer's comment (plain, or "/revise use a map here") goes into the PR's
// review batch (batch.go) with its file and line; the revise run replies
// on it when it is done. Any other command typed inline runs as one.
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
	if !strings.HasPrefix(pr.GetHead().GetRef(), "agent/") {
		return nil
	}
	installationID := githubapp.GetInstallationIDFromEvent(&event)
	ctx, log := githubapp.PreparePRContext(ctx, installationID, repo, pr.GetNumber())
	client, err := h.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	sender := event.GetSender().GetLogin()
	ok, err := h.canWrite(ctx, client, repo.GetOwner().GetLogin(), repo.GetName(), sender)
	if err != nil {
		return err
	}
	// Commands other than /revise run as typed, and a non-writer's command
	// gets the usual refusal from the command path.
	if cmd, perr := ParseCommand(comment.GetBody()); perr != nil || cmd != nil && (cmd.Name != "revise" || !ok) {
		return h.command(ctx, client, commandContext{
			installationID: installationID, repo: repo, number: pr.GetNumber(), isPR: true, sender: sender, deliveryID: deliveryID,
		}, cmd, perr)
	}
	if !ok {
		log.Info().Str("sender", sender).Msg("inline comment by a non-writer; not revising")
		return nil
	}
	return h.batchReview(ctx, client, startRequest{
		InstallationID: installationID, Repo: repo, Number: pr.GetNumber(), IsPR: true,
		Trigger: "inline-" + strconv.FormatInt(comment.GetID(), 10), DeliveryID: deliveryID, Sender: sender,
	})
}
