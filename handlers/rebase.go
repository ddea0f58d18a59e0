package handlers

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// rebase updates the App's PR with its base: the API first, a rebase run
// when the API reports a conflict. explicit (/rebase) says so when the API
// did it.
func (b *Base) rebase(ctx context.Context, t thread, sc *scene, trigger string, explicit bool) error {
	log := zerolog.Ctx(ctx).With().Int("pr", t.number).Logger()
	err := t.gh.UpdateBranch(ctx, t.number)
	if err == nil {
		log.Info().Msg("PR branch updated through the API")
		if explicit {
			return b.c.reply(ctx, t.gh, t.number, "github/branch_updated", BranchUpdatedData{Base: sc.pr.GetBase().GetRef()})
		}
		return nil
	}
	log.Info().Err(err).Msg("API update failed; starting a rebase run")
	repo := t.repo
	if repo.GetCloneURL() == "" || repo.GetDefaultBranch() == "" {
		full, err := t.gh.Repository(ctx)
		if err != nil {
			return err
		}
		repo = full
	}
	return b.starts.start(ctx, t.gh, startRequest{
		InstallationID: t.installation, Repo: repo, Number: t.number, IsPR: true, Issue: sc.issue,
		Mode: dispatch.ModeRebase, Trigger: trigger, DeliveryID: t.deliveryID,
		Branch: sc.pr.GetHead().GetRef(), BaseBranch: sc.pr.GetBase().GetRef(),
	})
}
