package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// Issues hands the engine a writer's trigger label on an issue: a plan
// run.
type Issues struct{ e Engine }

var _ githubapp.EventHandler = &Issues{}

// Handles implements githubapp.EventHandler.
func (h *Issues) Handles() []string { return []string{"issues"} }

// Handle implements githubapp.EventHandler.
func (h *Issues) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.IssuesEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse issues event: %w", err)
	}
	if e.GetAction() != "labeled" || e.GetLabel().GetName() != h.e.TriggerLabel() {
		return nil
	}
	repo, issue := e.GetRepo(), e.GetIssue()
	installation := githubapp.GetInstallationIDFromEvent(&e)
	ctx, log := githubapp.PrepareRepoContext(ctx, installation, repo)
	ctx = log.With().Int("issue", issue.GetNumber()).Logger().WithContext(ctx)
	if h.e.IgnoredSender(e.GetSender()) {
		log.Debug().Str("sender", e.GetSender().GetLogin()).Msg("ignoring bot")
		return nil
	}
	return h.e.Label(ctx, handlers.Delivery{ID: deliveryID, Installation: installation, Repo: repo, Number: issue.GetNumber(),
		Sender: e.GetSender().GetLogin(), Issue: issue})
}
