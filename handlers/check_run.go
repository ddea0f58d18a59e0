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

// CheckRun retries a run when a writer clicks "Re-run" on its check run.
type CheckRun struct{ *Base }

var _ githubapp.EventHandler = &CheckRun{}

// Handles implements githubapp.EventHandler.
func (h *CheckRun) Handles() []string { return []string{"check_run"} }

// Handle implements githubapp.EventHandler.
func (h *CheckRun) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event github.CheckRunEvent
	if err := json.Unmarshal(payload, &event); err != nil {
		return fmt.Errorf("parse check_run event: %w", err)
	}
	run := event.GetCheckRun()
	if event.GetAction() != "rerequested" || run.GetName() != h.CheckName || h.isIgnoredSender(event.GetSender()) {
		return nil
	}
	number, mode, ok := parseExternalID(run.GetExternalID())
	if !ok {
		return nil
	}
	repo := event.GetRepo()
	installationID := githubapp.GetInstallationIDFromEvent(&event)
	ctx, _ = githubapp.PreparePRContext(ctx, installationID, repo, number)
	client, err := h.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	cmd := &Command{Name: "retry"}
	if mode == dispatch.ModeRebase {
		cmd.Name = "rebase"
	}
	issue, _, err := client.Issues.Get(ctx, repo.GetOwner().GetLogin(), repo.GetName(), number)
	if err != nil {
		return fmt.Errorf("read #%d: %w", number, err)
	}
	return h.command(ctx, client, commandContext{
		installationID: installationID, repo: repo, number: number, isPR: issue.IsPullRequest(),
		sender: event.GetSender().GetLogin(), deliveryID: deliveryID, commentID: run.GetID(),
	}, cmd, nil)
}

// parseExternalID reads "T-XXXXXXXX:owner/repo#N:mode".
func parseExternalID(id string) (int, dispatch.Mode, bool) {
	parts := strings.Split(id, ":")
	if len(parts) != 3 || !dispatch.ValidTaskID(parts[0]) {
		return 0, "", false
	}
	_, num, ok := strings.Cut(parts[1], "#")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return n, dispatch.Mode(parts[2]), true
}
