package handlers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// Issues hands the table a writer's trigger label on an issue: a plan run.
type Issues struct{ b *Base }

var _ githubapp.EventHandler = &Issues{}

// Handles implements githubapp.EventHandler.
func (h *Issues) Handles() []string { return []string{"issues"} }

// Handle implements githubapp.EventHandler.
func (h *Issues) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.IssuesEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse issues event: %w", err)
	}
	if e.GetAction() != "labeled" || e.GetLabel().GetName() != h.b.TriggerLabel {
		return nil
	}
	repo, issue := e.GetRepo(), e.GetIssue()
	installation := githubapp.GetInstallationIDFromEvent(&e)
	ctx, log := githubapp.PrepareRepoContext(ctx, installation, repo)
	ctx = log.With().Int("issue", issue.GetNumber()).Logger().WithContext(ctx)
	if h.b.gate.isIgnoredSender(e.GetSender()) {
		log.Debug().Str("sender", e.GetSender().GetLogin()).Msg("ignoring bot")
		return nil
	}
	t, err := h.b.thread(installation, repo, issue.GetNumber(), false)
	if err != nil {
		return err
	}
	t.sender, t.deliveryID, t.issue = e.GetSender().GetLogin(), deliveryID, issue
	_, err = h.b.on(ctx, t, event{kind: lifecycle.Label, trigger: deliveryID, tried: "label this issue `" + h.b.TriggerLabel + "`"})
	return err
}

// thread opens the seam on an issue or pull request of repo.
func (b *Base) thread(installation int64, repo *github.Repository, number int, isPR bool) (thread, error) {
	gh, err := b.c.Hub.Repo(installation, repo.GetFullName())
	if err != nil {
		return thread{}, err
	}
	return thread{gh: gh, installation: installation, repo: repo, number: number, isPR: isPR}, nil
}
