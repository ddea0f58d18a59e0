package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

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
	ctx, _ = githubapp.PreparePRContext(ctx, installationID, repo, pr.GetNumber())
	client, err := h.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	return h.feedbackOnPR(ctx, client, commandContext{
		installationID: installationID, repo: repo, number: pr.GetNumber(), isPR: true,
		sender: event.GetSender().GetLogin(), deliveryID: deliveryID,
	}, review.GetBody(), "review-"+strconv.FormatInt(review.GetID(), 10))
}

// feedbackOnPR routes what a person wrote on a PR in a review (its body,
// an inline comment): a command other than /revise runs as one, and a
// non-writer's command gets the usual refusal; a writer's feedback on an
// agent PR goes into the PR's review batch (batch.go).
func (b *Base) feedbackOnPR(ctx context.Context, client *github.Client, cc commandContext, body, trigger string) error {
	ok, err := b.canWrite(ctx, client, cc.owner(), cc.name(), cc.sender)
	if err != nil {
		return err
	}
	if cmd, perr := ParseCommand(body); perr != nil || cmd != nil && (cmd.Name != "revise" || !ok) {
		return b.command(ctx, client, cc, cmd, perr)
	}
	if !ok {
		zerolog.Ctx(ctx).Info().Str("sender", cc.sender).Msg("review feedback by a non-writer; not revising")
		return nil
	}
	_, _, isAgent, err := b.agentPR(ctx, client, cc.owner(), cc.name(), cc.number)
	if err != nil || !isAgent {
		return err
	}
	return b.batches.add(ctx, client, startRequest{
		InstallationID: cc.installationID, Repo: cc.repo, Number: cc.number, IsPR: true, Mode: dispatch.ModeRevise,
		Trigger: trigger, DeliveryID: cc.deliveryID, Sender: cc.sender,
	})
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
