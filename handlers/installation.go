package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// Installation sets the app up in every repository it is installed on
// (the trigger and state labels) and stops its work when it is removed.
type Installation struct{ *Base }

var _ githubapp.EventHandler = &Installation{}

// Handles implements githubapp.EventHandler.
func (h *Installation) Handles() []string { return []string{"installation"} }

// Handle implements githubapp.EventHandler.
func (h *Installation) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event github.InstallationEvent
	if err := json.Unmarshal(payload, &event); err != nil {
		return fmt.Errorf("parse installation event: %w", err)
	}
	id := event.GetInstallation().GetID()
	log := zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Str("action", event.GetAction()).Logger()
	ctx = log.WithContext(ctx)
	switch event.GetAction() {
	case "created", "new_permissions_accepted", "unsuspend":
		return h.setUpRepos(ctx, id, event.Repositories)
	case "deleted", "suspend":
		return h.stopRuns(ctx, func(installation int64, _ string) bool { return installation == id })
	}
	return nil
}

// setUpRepos creates the labels in each repository; existing ones are kept.
func (b *Base) setUpRepos(ctx context.Context, installationID int64, repos []*github.Repository) error {
	client, err := b.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	log := zerolog.Ctx(ctx)
	var firstErr error
	for _, r := range repos {
		owner, name, _ := cutFullName(r.GetFullName())
		for label, color := range b.labelSet() {
			_, resp, err := client.Issues.CreateLabel(ctx, owner, name, &github.Label{Name: github.String(label), Color: github.String(color), Description: github.String(labelDescription(label, b.TriggerLabel))})
			if err != nil && (resp == nil || resp.StatusCode != http.StatusUnprocessableEntity) { // 422: exists
				log.Error().Err(err).Str("repo", r.GetFullName()).Str("label", label).Msg("create label")
				if firstErr == nil {
					firstErr = fmt.Errorf("create label %q in %s: %w", label, r.GetFullName(), err)
				}
			}
		}
		log.Info().Str("repo", r.GetFullName()).Msg("repository set up")
	}
	return firstErr
}

func labelDescription(label, trigger string) string {
	switch label {
	case trigger:
		return "Ask the sandbox agent to plan and implement this issue"
	case LabelPlanning:
		return "The agent is writing a plan"
	case LabelAwaitingApproval:
		return "A plan is waiting for /approve"
	case LabelRunning:
		return "The agent is working in a sandbox"
	case LabelDone:
		return "The agent finished"
	}
	return "The agent's last run failed"
}

// stopRuns cancels every run that match selects, e.g. all runs of an
// uninstalled installation.
func (b *Base) stopRuns(ctx context.Context, match func(installation int64, repo string) bool) error {
	runs, err := b.Backend.List(ctx)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	log := zerolog.Ctx(ctx)
	for _, r := range runs {
		if r.State.Ended() || !match(r.Meta.InstallationID, r.Meta.Repo) {
			continue
		}
		b.Runs.MarkAborted(r.Meta.TaskID, "uninstall")
		if err := b.Backend.Cancel(ctx, r.Meta.TaskID); err != nil {
			log.Error().Err(err).Str("task_id", r.Meta.TaskID).Msg("cancel run")
			continue
		}
		log.Info().Str("task_id", r.Meta.TaskID).Str("repo", r.Meta.Repo).Msg("run cancelled: app removed")
	}
	return nil
}

func cutFullName(full string) (string, string, bool) {
	for i := 0; i < len(full); i++ {
		if full[i] == '/' {
			return full[:i], full[i+1:], true
		}
	}
	return full, "", false
}
