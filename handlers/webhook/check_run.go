package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// CheckRun hands the engine a writer's "Re-run" on a run's check run: the
// run, again.
type CheckRun struct{ e Engine }

var _ githubapp.EventHandler = &CheckRun{}

// Handles implements githubapp.EventHandler.
func (h *CheckRun) Handles() []string { return []string{"check_run"} }

// Handle implements githubapp.EventHandler.
func (h *CheckRun) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.CheckRunEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse check_run event: %w", err)
	}
	run := e.GetCheckRun()
	if e.GetAction() != "rerequested" || run.GetName() != h.e.CheckName() || h.e.IgnoredSender(e.GetSender()) {
		return nil
	}
	return h.e.Rerun(ctx, handlers.Delivery{ID: deliveryID, Installation: githubapp.GetInstallationIDFromEvent(&e), Repo: e.GetRepo(),
		Sender: e.GetSender().GetLogin(), CommentID: run.GetID()}, run.GetExternalID())
}
