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
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
)

// CheckRun retries a run when a writer clicks "Re-run" on its check run.
type CheckRun struct{ b *Base }

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
	if e.GetAction() != "rerequested" || run.GetName() != h.b.CheckName || h.b.gate.isIgnoredSender(e.GetSender()) {
		return nil
	}
	number, mode, ok := parseExternalID(run.GetExternalID())
	if !ok {
		return nil
	}
	repo := e.GetRepo()
	installation := githubapp.GetInstallationIDFromEvent(&e)
	ctx, _ = githubapp.PreparePRContext(ctx, installation, repo, number)
	cmd := &commands.Command{Name: "retry"}
	if mode == dispatch.ModeRebase {
		cmd.Name = "rebase"
	}
	t, err := h.b.thread(installation, repo, number, false)
	if err != nil {
		return err
	}
	issue, err := t.gh.Issue(ctx, number)
	if err != nil {
		return err
	}
	t.isPR, t.sender, t.deliveryID, t.commentID = issue.IsPullRequest(), e.GetSender().GetLogin(), deliveryID, run.GetID()
	_, err = h.b.on(ctx, t, commandEvent(cmd, nil, commentTrigger(run.GetID())))
	return err
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
