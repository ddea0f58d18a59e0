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

// PullRequestReview starts a revise run when a writer requests changes on
// an agent PR, or submits a review with a body. The review's inline
// comments go along as feedback.
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
	state := strings.ToLower(review.GetState())
	if state != "changes_requested" && strings.TrimSpace(review.GetBody()) == "" {
		return nil // approvals and bare inline comments wait for the next revise
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
	// A review body that is itself a command is handled as one.
	if cmd, perr := ParseCommand(review.GetBody()); cmd != nil || perr != nil {
		return h.command(ctx, client, commandContext{installationID: installationID, repo: repo, number: pr.GetNumber(), isPR: true,
			sender: sender, commentID: 0, deliveryID: deliveryID}, cmd, perr)
	}
	ok, err := h.canWrite(ctx, client, owner, name, sender)
	if err != nil {
		return err
	}
	if !ok {
		log.Info().Str("sender", sender).Msg("review by a non-writer; not revising")
		return nil
	}
	_, issue, isAgent, err := h.agentPR(ctx, client, owner, name, pr.GetNumber())
	if err != nil || !isAgent {
		return err
	}
	feedback, err := h.reviewFeedback(ctx, client, owner, name, pr.GetNumber(), review)
	if err != nil {
		return err
	}
	return h.start(ctx, client, startRequest{
		InstallationID: installationID, Repo: repo, Number: pr.GetNumber(), IsPR: true, Issue: issue,
		Mode: dispatch.ModeRevise, Trigger: "review-" + strconv.FormatInt(review.GetID(), 10), DeliveryID: deliveryID,
		Sender: sender, Feedback: feedback, Branch: pr.GetHead().GetRef(), BaseBranch: pr.GetBase().GetRef(),
	})
}

// reviewFeedback is the review body plus its inline comments by writers,
// each with the file and line it is about.
func (b *Base) reviewFeedback(ctx context.Context, client *github.Client, owner, repo string, number int, review *github.PullRequestReview) (string, error) {
	var parts []string
	if body := strings.TrimSpace(review.GetBody()); body != "" {
		parts = append(parts, body)
	}
	comments, _, err := client.PullRequests.ListComments(ctx, owner, repo, number, &github.PullRequestListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return "", fmt.Errorf("list review comments of #%d: %w", number, err)
	}
	for _, c := range comments {
		if c.GetPullRequestReviewID() != review.GetID() {
			continue
		}
		ok, err := b.canWrite(ctx, client, owner, repo, c.GetUser().GetLogin())
		if err != nil {
			return "", err
		}
		if ok {
			parts = append(parts, inlineContext(c.GetPath(), c.GetLine(), c.GetDiffHunk())+c.GetBody())
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

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
