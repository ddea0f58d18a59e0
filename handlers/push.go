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
)

// Push keeps agent PRs current: a push to a branch that open agent PRs
// target updates each of them, first through GitHub's update-branch API (a
// merge, free), and when that fails (a conflict) with a rebase run in which
// the agent resolves the conflicts.
type Push struct{ *Base }

var _ githubapp.EventHandler = &Push{}

// Handles implements githubapp.EventHandler.
func (h *Push) Handles() []string { return []string{"push"} }

// Handle implements githubapp.EventHandler.
func (h *Push) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event github.PushEvent
	if err := json.Unmarshal(payload, &event); err != nil {
		return fmt.Errorf("parse push event: %w", err)
	}
	branch, isBranch := strings.CutPrefix(event.GetRef(), "refs/heads/")
	if !isBranch || event.GetDeleted() || strings.HasPrefix(branch, "agent/") {
		return nil
	}
	repo := pushRepo(event.GetRepo())
	installationID := githubapp.GetInstallationIDFromEvent(&event)
	ctx, log := githubapp.PrepareRepoContext(ctx, installationID, repo)
	client, err := h.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	owner, name := repo.GetOwner().GetLogin(), repo.GetName()
	login, err := h.LoadIdentity(ctx)
	if err != nil {
		return err
	}
	prs, _, err := client.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{State: "open", Base: branch, ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return fmt.Errorf("list PRs into %s: %w", branch, err)
	}
	for _, pr := range prs {
		// Only PRs this App opened from the base repository: a fork's
		// agent/... branch with a copied marker, or a person's PR on an
		// agent/ branch, must get neither an update nor a sandbox.
		if _, ok := isAgentPR(pr, login); !ok {
			continue
		}
		if err := h.rebase(ctx, client, installationID, repo, pr, "push-"+event.GetAfter(), deliveryID, false); err != nil {
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

// rebase updates an agent PR with its base: the API first, a sandbox run
// when the API reports a conflict.
func (b *Base) rebase(ctx context.Context, client *github.Client, installationID int64, repo *github.Repository, pr *github.PullRequest, trigger, deliveryID string, explicit bool) error {
	log := zerolog.Ctx(ctx).With().Int("pr", pr.GetNumber()).Logger()
	owner, name := repo.GetOwner().GetLogin(), repo.GetName()
	_, _, err := client.PullRequests.UpdateBranch(ctx, owner, name, pr.GetNumber(), nil)
	if err == nil || isAccepted(err) {
		log.Info().Msg("PR branch updated through the API")
		if explicit {
			return b.reply(ctx, client, owner, name, pr.GetNumber(), "github/branch_updated", BranchUpdatedData{Base: pr.GetBase().GetRef()})
		}
		return nil
	}
	log.Info().Err(err).Msg("API update failed; starting a rebase run")
	_, issue, ok, perr := b.agentPR(ctx, client, owner, name, pr.GetNumber())
	if perr != nil {
		return perr
	}
	if !ok {
		return fmt.Errorf("PR #%d is not an agent PR of this App; not starting a rebase run", pr.GetNumber())
	}
	if repo.GetCloneURL() == "" || repo.GetDefaultBranch() == "" {
		full, _, err := client.Repositories.Get(ctx, owner, name)
		if err != nil {
			return fmt.Errorf("read repository: %w", err)
		}
		repo = full
	}
	return b.start(ctx, client, startRequest{
		InstallationID: installationID, Repo: repo, Number: pr.GetNumber(), IsPR: true, Issue: issue,
		Mode: dispatch.ModeRebase, Trigger: trigger, DeliveryID: deliveryID,
		Branch: pr.GetHead().GetRef(), BaseBranch: pr.GetBase().GetRef(),
	})
}

// isAccepted: update-branch answers 202, which go-github reports as an
// AcceptedError although the update was scheduled.
func isAccepted(err error) bool {
	_, ok := err.(*github.AcceptedError)
	return ok
}
