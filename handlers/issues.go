package handlers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Issues starts a plan run when a writer adds the trigger label.
type Issues struct{ *Base }

var _ githubapp.EventHandler = &Issues{}

// Handles implements githubapp.EventHandler.
func (h *Issues) Handles() []string { return []string{"issues"} }

// Handle implements githubapp.EventHandler.
func (h *Issues) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event github.IssuesEvent
	if err := json.Unmarshal(payload, &event); err != nil {
		return fmt.Errorf("parse issues event: %w", err)
	}
	if event.GetAction() != "labeled" || event.GetLabel().GetName() != h.TriggerLabel {
		return nil
	}
	repo, issue := event.GetRepo(), event.GetIssue()
	ctx, log := githubapp.PrepareRepoContext(ctx, githubapp.GetInstallationIDFromEvent(&event), repo)
	log = log.With().Int("issue", issue.GetNumber()).Logger()
	ctx = log.WithContext(ctx)
	if h.isIgnoredSender(event.GetSender()) {
		log.Debug().Str("sender", event.GetSender().GetLogin()).Msg("ignoring bot")
		return nil
	}
	if st := stateOf(issue.Labels); st == LabelPlanning || st == LabelRunning || st == LabelAwaitingApproval {
		log.Info().Str("state", st).Msg("issue already has a task; ignoring the label")
		return nil
	}
	client, err := h.NewInstallationClient(githubapp.GetInstallationIDFromEvent(&event))
	if err != nil {
		return err
	}
	owner, name, sender := repo.GetOwner().GetLogin(), repo.GetName(), event.GetSender().GetLogin()
	ok, err := h.canWrite(ctx, client, owner, name, sender)
	if err != nil {
		return err
	}
	if !ok {
		log.Info().Str("sender", sender).Msg("refusing: sender cannot write to the repository")
		return h.refuse(ctx, client, repo, issue.GetNumber(), sender, "label this issue `"+h.TriggerLabel+"`")
	}
	return h.start(ctx, client, startRequest{
		InstallationID: githubapp.GetInstallationIDFromEvent(&event), Repo: repo, Number: issue.GetNumber(),
		Mode: dispatch.ModePlan, Trigger: deliveryID, DeliveryID: deliveryID, Sender: sender, Round: 1,
	})
}
