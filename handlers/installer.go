package handlers

import (
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// installer owns a repository's life with the App: its labels when the
// App is installed, the end of its runs when the App is removed.
type installer struct {
	c        *core
	runs     *follow.Runs
	routines *Routines
}

// setUpRepos creates the labels in each repository; existing ones are kept.
func (ins *installer) setUpRepos(ctx context.Context, installation int64, repos []*github.Repository) error {
	log := zerolog.Ctx(ctx)
	var firstErr error
	for _, r := range repos {
		gh, err := ins.c.Hub.Repo(installation, r.GetFullName())
		if err != nil {
			return err
		}
		for label, color := range ins.labelSet() {
			if err := gh.CreateLabel(ctx, label, color, labelDescription(label, ins.c.TriggerLabel)); err != nil {
				log.Error().Err(err).Str("repo", r.GetFullName()).Str("label", label).Msg("create label")
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		log.Info().Str("repo", r.GetFullName()).Msg("repository set up")
		ins.routines.added(ctx, installation, r)
	}
	return firstErr
}

// labelSet is the trigger label and the state labels, with the colours
// installation events create them with.
func (ins *installer) labelSet() map[string]string {
	return map[string]string{
		ins.c.TriggerLabel:              "5319e7",
		lifecycle.LabelPlanning:         "c5def5",
		lifecycle.LabelAwaitingApproval: "fbca04",
		lifecycle.LabelRunning:          "1d76db",
		lifecycle.LabelDone:             "0e8a16",
		lifecycle.LabelFailed:           "b60205",
		lifecycle.LabelQueued:           "ededed",
		lifecycle.LabelOverBudget:       "d93f0b",
	}
}

func labelDescription(label, trigger string) string {
	switch label {
	case trigger:
		return "Ask the sandbox agent to plan and implement this issue"
	case lifecycle.LabelPlanning:
		return "The agent is writing a plan"
	case lifecycle.LabelAwaitingApproval:
		return "A plan is waiting for /approve"
	case lifecycle.LabelRunning:
		return "The agent is working in a sandbox"
	case lifecycle.LabelDone:
		return "The agent finished"
	case lifecycle.LabelOverBudget:
		return "The month's budget left too little for the run; /approve once it is raised"
	}
	return "The agent's last run failed"
}

// stopRuns cancels every run that match selects, e.g. all runs of an
// uninstalled installation.
func (ins *installer) stopRuns(ctx context.Context, match func(installation int64, repo string) bool) error {
	runs, err := ins.c.Backend.List(ctx)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	log := zerolog.Ctx(ctx)
	for _, r := range runs {
		if r.State.Ended() || !match(r.Meta.InstallationID, r.Meta.Repo) {
			continue
		}
		ins.runs.MarkAborted(r.Meta.TaskID, "uninstall")
		if err := ins.c.Backend.Cancel(ctx, r.Meta.TaskID); err != nil {
			log.Error().Err(err).Str("task_id", r.Meta.TaskID).Msg("cancel run")
			continue
		}
		log.Info().Str("task_id", r.Meta.TaskID).Str("repo", r.Meta.Repo).Msg("run cancelled: app removed")
	}
	return nil
}
