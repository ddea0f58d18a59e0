package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// Push keeps agent PRs current: a push to a branch that open agent PRs
// target updates each of them, first through GitHub's update-branch API (a
// merge, free), and when that fails (a conflict) with a rebase run in which
// the agent resolves the conflicts.
type Push struct{ b *Base }

var _ githubapp.EventHandler = &Push{}

// Handles implements githubapp.EventHandler.
func (h *Push) Handles() []string { return []string{"push"} }

// Handle implements githubapp.EventHandler.
func (h *Push) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.PushEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse push event: %w", err)
	}
	branch, isBranch := strings.CutPrefix(e.GetRef(), "refs/heads/")
	if !isBranch || e.GetDeleted() || strings.HasPrefix(branch, dispatch.BranchPrefix) {
		return nil
	}
	repo := pushRepo(e.GetRepo())
	installation := githubapp.GetInstallationIDFromEvent(&e)
	ctx, log := githubapp.PrepareRepoContext(ctx, installation, repo)
	if branch == repo.GetDefaultBranch() {
		// The default branch's .sandbox.yml declares the routines.
		if err := h.b.Routines.cat.pushed(ctx, installation, repo, e.GetAfter()); err != nil {
			log.Warn().Err(err).Msg("routines: read the routines at the new head")
		}
	}
	gh, err := h.b.c.Hub.Repo(installation, repo.GetFullName())
	if err != nil {
		return err
	}
	prs, err := gh.OpenPullRequests(ctx, "", branch)
	if err != nil {
		return err
	}
	for _, pr := range prs {
		// Only PRs this App opened from the base repository are ours (the
		// table): a fork's agent/... branch with a copied marker, or a
		// person's PR on an agent/ branch, gets neither an update nor a
		// sandbox.
		t := thread{gh: gh, installation: installation, repo: repo, number: pr.GetNumber(), isPR: true, pr: pr,
			sender: e.GetSender().GetLogin(), deliveryID: deliveryID}
		if _, err := h.b.on(ctx, t, event{kind: lifecycle.Push, trigger: "push-" + e.GetAfter()}); err != nil {
			log.Error().Err(err).Int("pr", pr.GetNumber()).Msg("update agent PR")
		}
	}
	return nil
}

// pushRepo converts the push event's repository shape to the common one.
func pushRepo(r *github.PushEventRepository) *github.Repository {
	return &github.Repository{
		ID: r.ID, Name: r.Name, FullName: r.FullName, DefaultBranch: r.DefaultBranch, CloneURL: r.CloneURL,
		Owner: &github.User{Login: github.String(strings.Split(r.GetFullName(), "/")[0])},
	}
}

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
