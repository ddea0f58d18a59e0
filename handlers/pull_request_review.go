package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// PullRequestReview puts a writer's review of an agent PR (changes
// requested, or a review with a body) into the PR's review batch, whose
// revise run starts when the batch's window closes (batch.go) and takes
// the review's body and inline comments along.
type PullRequestReview struct{ *Base }

var _ githubapp.EventHandler = &PullRequestReview{}

// Handles implements githubapp.EventHandler.
func (h *PullRequestReview) Handles() []string { return []string{"pull_request_review"} }

// Handle implements githubapp.EventHandler.
func (h *PullRequestReview) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event github.PullRequestReviewEvent
	if err := json.Unmarshal(payload, &event); err != nil {
		return fmt.Errorf("parse pull_request_review event: %w", err)
	}
	review, pr, repo := event.GetReview(), event.GetPullRequest(), event.GetRepo()
	if event.GetAction() != "submitted" || h.isIgnoredSender(event.GetSender()) {
		return nil
	}
	// Approvals ask for nothing; a bare "commented" review is the wrapper
	// of inline comments, which their own events bring.
	state := strings.ToLower(review.GetState())
	if state == "approved" || state != "changes_requested" && strings.TrimSpace(review.GetBody()) == "" {
		return nil
	}
	if !strings.HasPrefix(pr.GetHead().GetRef(), "agent/") {
		return nil
	}
	installationID := githubapp.GetInstallationIDFromEvent(&event)
	ctx, log := githubapp.PreparePRContext(ctx, installationID, repo, pr.GetNumber())
	client, err := h.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	owner, name, sender := repo.GetOwner().GetLogin(), repo.GetName(), event.GetSender().GetLogin()
	ok, err := h.canWrite(ctx, client, owner, name, sender)
	if err != nil {
		return err
	}
	// A review body that is a command other than /revise is run as one
	// (and a non-writer's gets the refusal); a writer's /revise is
	// feedback like any review.
	if cmd, perr := ParseCommand(review.GetBody()); perr != nil || cmd != nil && (cmd.Name != "revise" || !ok) {
		return h.command(ctx, client, commandContext{installationID: installationID, repo: repo, number: pr.GetNumber(), isPR: true,
			sender: sender, commentID: 0, deliveryID: deliveryID}, cmd, perr)
	}
	if !ok {
		log.Info().Str("sender", sender).Msg("review by a non-writer; not revising")
		return nil
	}
	return h.batchReview(ctx, client, startRequest{
		InstallationID: installationID, Repo: repo, Number: pr.GetNumber(), IsPR: true,
		Trigger: "review-" + strconv.FormatInt(review.GetID(), 10), DeliveryID: deliveryID, Sender: sender,
	})
}

// batchReview adds feedback on PR req.Number to its review batch if the PR
// is the agent's.
func (b *Base) batchReview(ctx context.Context, client *github.Client, req startRequest) error {
	_, _, isAgent, err := b.agentPR(ctx, client, req.owner(), req.name(), req.Number)
	if err != nil || !isAgent {
		return err
	}
	req.Mode = dispatch.ModeRevise
	return b.batches.add(ctx, client, req)
}

// inlineContext is where an inline comment sits, for the agent.
func inlineContext(path string, line int, hunk string) string {
	if path == "" {
		return ""
	}
	s := fmt.Sprintf("On `%s`", path)
	if line > 0 {
		s += fmt.Sprintf(" line %d", line)
	}
	s += ":\n"
	if hunk != "" {
		s += "```diff\n" + hunk + "\n```\n"
	}
	return s
}
