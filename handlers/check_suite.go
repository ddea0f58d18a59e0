package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// CheckSuite and Status hand the table the completion of a pull request's
// checks. Subscribed events, and why each:
//
//   - check_suite (completed): one per app's suite on a commit when its
//     check runs have all ended. GitHub Actions runs each workflow as a
//     suite of the github-actions app, and other CI apps report the same
//     way, so this covers workflows and third-party checks with one
//     delivery per suite (check_run would send one per job).
//   - status: commit statuses (older CI services, external tools) are no
//     check runs and have no suite; each change of one is a delivery.
//
// workflow_run is not needed: a workflow run's completion is its suite's.
// Whatever brings the news, only the repository's own head counts: an
// Actions job of a fork's pull request (head_repository another
// repository) is left out when the checks are read (ci_checks.go), and a
// fork's pull request is never the App's.
// Either event only says that something on a commit changed; the bot
// then reads every check run and status of the commit (checksOn) and acts
// once they have all completed, so the last one to end is the one that
// counts, whichever event brings it.
type CheckSuite struct{ b *Base }

var _ githubapp.EventHandler = &CheckSuite{}

// Handles implements githubapp.EventHandler.
func (h *CheckSuite) Handles() []string { return []string{"check_suite"} }

// Handle implements githubapp.EventHandler.
func (h *CheckSuite) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.CheckSuiteEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse check_suite event: %w", err)
	}
	suite := e.GetCheckSuite()
	if e.GetAction() == "completed" && suite.GetHeadBranch() != "" && suite.GetHeadBranch() == e.GetRepo().GetDefaultBranch() && !h.b.ci.ownApp(suite.GetApp()) {
		// The default branch's checks: its on: main_ci_failed routines.
		installation := githubapp.GetInstallationIDFromEvent(&e)
		rctx, _ := githubapp.PrepareRepoContext(ctx, installation, e.GetRepo())
		return h.b.Routines.mainChecks(rctx, installation, e.GetRepo(), suite.GetHeadSHA())
	}
	if e.GetAction() != "completed" || !strings.HasPrefix(suite.GetHeadBranch(), dispatch.BranchPrefix) || h.b.ci.ownApp(suite.GetApp()) {
		return nil
	}
	var numbers []int
	for _, pr := range suite.PullRequests {
		numbers = append(numbers, pr.GetNumber())
	}
	return h.b.ci.headChanged(ctx, githubapp.GetInstallationIDFromEvent(&e), e.GetRepo(), suite.GetHeadSHA(), suite.GetHeadBranch(), numbers, deliveryID)
}

// ownApp reports whether app is this App (its own check suite: the
// progress check of a run).
func (cf *ciFixer) ownApp(app *github.App) bool {
	slug := cf.c.slug()
	return slug != "" && strings.EqualFold(app.GetSlug(), slug)
}

// Status hands the table a commit status's change (see CheckSuite).
type Status struct{ b *Base }

var _ githubapp.EventHandler = &Status{}

// Handles implements githubapp.EventHandler.
func (h *Status) Handles() []string { return []string{"status"} }

// Handle implements githubapp.EventHandler.
func (h *Status) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.StatusEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse status event: %w", err)
	}
	if e.GetState() == "pending" {
		return nil
	}
	for _, br := range e.Branches {
		if br.GetName() == e.GetRepo().GetDefaultBranch() {
			installation := githubapp.GetInstallationIDFromEvent(&e)
			rctx, _ := githubapp.PrepareRepoContext(ctx, installation, e.GetRepo())
			if err := h.b.Routines.mainChecks(rctx, installation, e.GetRepo(), e.GetSHA()); err != nil {
				return err
			}
		}
		if strings.HasPrefix(br.GetName(), dispatch.BranchPrefix) {
			if err := h.b.ci.headChanged(ctx, githubapp.GetInstallationIDFromEvent(&e), e.GetRepo(), e.GetSHA(), br.GetName(), nil, deliveryID); err != nil {
				return err
			}
		}
	}
	return nil
}

// headChanged looks at the checks of sha on each open PR whose head it is:
// the PRs the event named, or those from branch.
func (cf *ciFixer) headChanged(ctx context.Context, installation int64, repo *github.Repository, sha, branch string, numbers []int, deliveryID string) error {
	ctx, log := githubapp.PrepareRepoContext(ctx, installation, repo)
	gh, err := cf.c.Hub.Repo(installation, repo.GetFullName())
	if err != nil {
		return err
	}
	var prs []*github.PullRequest
	if len(numbers) == 0 {
		owner, _, _ := strings.Cut(repo.GetFullName(), "/")
		if prs, err = gh.OpenPullRequests(ctx, owner+":"+branch, ""); err != nil {
			return err
		}
	}
	for _, n := range numbers {
		pr, err := gh.PullRequest(ctx, n)
		if err != nil {
			return err
		}
		prs = append(prs, pr)
	}
	for _, pr := range prs {
		if hr := pr.GetHead().GetRepo().GetFullName(); hr != "" && !strings.EqualFold(hr, repo.GetFullName()) {
			// A fork's pull request: its CI is not the repository's own.
			cf.c.ciForks.Add(1)
			log.Info().Int("pr", pr.GetNumber()).Str("head_repository", hr).Msg("a fork's pull request; its checks are not the repository's own")
			continue
		}
		if pr.GetState() == "closed" || !strings.EqualFold(pr.GetHead().GetSHA(), sha) {
			log.Debug().Int("pr", pr.GetNumber()).Msg("not the PR's head (any more); nothing to do")
			continue
		}
		t := thread{gh: gh, installation: installation, repo: repo, number: pr.GetNumber(), isPR: true, pr: pr, deliveryID: deliveryID}
		if err := cf.checksOn(ctx, t, sha); err != nil {
			log.Error().Err(err).Int("pr", pr.GetNumber()).Msg("the PR's checks")
		}
	}
	return nil
}
