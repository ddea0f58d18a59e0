package webhook

import (
	"context"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// checkSuite and status hand the engine the completion of a commit's
// checks: on the App's pull requests (a failure is fixed) and on the
// default branch (its on: main_ci_failed routines). Subscribed events, and
// why each:
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
// repository) is left out when the checks are read, and a fork's pull
// request is never the App's. Either event only says that something on a
// commit changed; the engine then reads every check run and status of the
// commit and acts once they have all completed, so the last one to end is
// the one that counts, whichever event brings it.
func checkSuite(ctx context.Context, eng Engine, e *github.CheckSuiteEvent, deliveryID string) error {
	suite := e.GetCheckSuite()
	if e.GetAction() != "completed" || eng.OwnApp(suite.GetApp().GetSlug()) {
		return nil
	}
	installation := githubapp.GetInstallationIDFromEvent(e)
	d := handlers.Delivery{ID: deliveryID, Installation: installation, Repo: e.GetRepo()}
	if branch := suite.GetHeadBranch(); branch != "" && branch == e.GetRepo().GetDefaultBranch() {
		rctx, _ := githubapp.PrepareRepoContext(ctx, installation, e.GetRepo())
		return eng.MainChecks(rctx, d, suite.GetHeadSHA())
	}
	if !strings.HasPrefix(suite.GetHeadBranch(), dispatch.BranchPrefix) {
		return nil
	}
	var numbers []int
	for _, pr := range suite.PullRequests {
		numbers = append(numbers, pr.GetNumber())
	}
	return eng.ChecksChanged(ctx, d, suite.GetHeadSHA(), suite.GetHeadBranch(), numbers)
}

// status hands the engine a commit status's change (see checkSuite).
func status(ctx context.Context, eng Engine, e *github.StatusEvent, deliveryID string) error {
	if e.GetState() == "pending" {
		return nil
	}
	installation := githubapp.GetInstallationIDFromEvent(e)
	d := handlers.Delivery{ID: deliveryID, Installation: installation, Repo: e.GetRepo()}
	for _, br := range e.Branches {
		if br.GetName() == e.GetRepo().GetDefaultBranch() {
			rctx, _ := githubapp.PrepareRepoContext(ctx, installation, e.GetRepo())
			if err := eng.MainChecks(rctx, d, e.GetSHA()); err != nil {
				return err
			}
		}
		if strings.HasPrefix(br.GetName(), dispatch.BranchPrefix) {
			if err := eng.ChecksChanged(ctx, d, e.GetSHA(), br.GetName(), nil); err != nil {
				return err
			}
		}
	}
	return nil
}
