package handlers

import (
	"context"
	"io"
	"slices"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/cilog"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// What the repository's own checks say about a commit: every app's check
// runs (GitHub Actions jobs are check runs of the github-actions app) and
// the commit statuses, the bot's own progress check left out.

// ciCheck is one check on a commit.
type ciCheck struct {
	name       string
	conclusion string
	// run is the check run, status the commit status (one is nil).
	run    *github.CheckRun
	status *github.RepoStatus
}

// ciState is a commit's checks: whether they all completed, and which
// failed.
type ciState struct {
	sha     string
	pending []string
	failed  []ciCheck
	// checks counts every check seen.
	checks int
}

func (s ciState) complete() bool { return len(s.pending) == 0 }

func (s ciState) names() []string {
	out := make([]string, 0, len(s.failed))
	for _, c := range s.failed {
		out = append(out, c.name)
	}
	return out
}

// failingConclusions are the ends a fix run can do something about; a
// cancelled, skipped, neutral or stale check, or one waiting for a
// person's action, is not a failure of the change.
var failingConclusions = []string{"failure", "timed_out", "startup_failure"}

// actionsApp is the slug of GitHub Actions' check runs.
const actionsApp = "github-actions"

// readChecks reads the checks on sha.
func (c *core) readChecks(ctx context.Context, gh hub.GitHub, sha string) (ciState, error) {
	st := ciState{sha: sha}
	runs, err := gh.CheckRunsOn(ctx, sha)
	if err != nil {
		return st, err
	}
	slug := c.slug()
	own := map[int64]bool{} // check suite id -> ran on this repository's head
	for _, r := range runs {
		if strings.HasPrefix(r.GetName(), c.CheckName) && (r.GetApp() == nil || r.GetApp().GetSlug() == slug) {
			continue // the bot's own progress check, and its routines' (routines_open.go)
		}
		if r.GetApp().GetSlug() == actionsApp && !actionsOwnHead(ctx, gh, r, own) {
			c.ciForks.Add(1)
			continue
		}
		st.checks++
		name := r.GetName()
		switch {
		case r.GetStatus() != "completed":
			st.pending = append(st.pending, name)
		case slices.Contains(failingConclusions, r.GetConclusion()):
			st.failed = append(st.failed, ciCheck{name: name, conclusion: r.GetConclusion(), run: r})
		}
	}
	statuses, err := gh.Statuses(ctx, sha)
	if err != nil {
		return st, err
	}
	for _, s := range statuses {
		st.checks++
		switch s.GetState() {
		case "pending":
			st.pending = append(st.pending, s.GetContext())
		case "failure", "error":
			st.failed = append(st.failed, ciCheck{name: s.GetContext(), conclusion: s.GetState(), status: s})
		}
	}
	return st, nil
}

// actionsOwnHead reports whether an Actions job ran for the repository's
// own head. A pull request from a fork runs the base repository's
// workflows on the fork's commit, and its check runs sit on that commit
// in the base repository like any other: a fork whose branch bears the
// App's branch name and whose head is the App's commit would put its own
// CI's failures (on code it controls, without the repository's secrets)
// on the App's head. Only the job's workflow run says whose head it was
// (head_repository); a job whose run cannot be read is not counted
// either. known caches the answer by check suite (one workflow run each).
func actionsOwnHead(ctx context.Context, gh hub.GitHub, r *github.CheckRun, known map[int64]bool) bool {
	suite := r.GetCheckSuite().GetID()
	if own, ok := known[suite]; ok && suite != 0 {
		return own
	}
	own, head := false, ""
	job, err := gh.WorkflowJob(ctx, r.GetID())
	if err == nil {
		var run *github.WorkflowRun
		if run, err = gh.WorkflowRun(ctx, job.GetRunID()); err == nil {
			head = run.GetHeadRepository().GetFullName()
			own = strings.EqualFold(head, gh.FullName())
		}
	}
	log := zerolog.Ctx(ctx).With().Str("check", r.GetName()).Int64("check_suite", suite).Logger()
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("whose head this Actions job ran on cannot be read; the check is not counted")
	case !own:
		log.Info().Str("head_repository", head).Msg("an Actions job of another repository's head (a fork's pull request) is not counted")
	}
	known[suite] = own
	return own
}

// failingOnBase are the names of the checks that fail on the head of the
// base branch (none when they cannot be read: then the change is blamed,
// and a fix run looks). GitHub reads a branch's name as its head commit.
func (c *core) failingOnBase(ctx context.Context, gh hub.GitHub, base string) map[string]bool {
	log := zerolog.Ctx(ctx)
	st, err := c.readChecks(ctx, gh, "heads/"+base)
	if err != nil {
		log.Warn().Err(err).Str("base", base).Msg("the base branch's checks could not be read")
		return nil
	}
	out := map[string]bool{}
	for _, chk := range st.failed {
		out[chk.name] = true
	}
	return out
}

// Bounds of what a CI fix run is given of each failing check.
const (
	maxCIFailures    = 10
	maxCIAnnotations = 20
	maxCISummary     = 2000
	maxCIMessage     = 500
)

// ciFailure is what the fix run is told of one failing check.
func (c *core) ciFailure(ctx context.Context, gh hub.GitHub, chk ciCheck) dispatch.CIFailure {
	clean := func(s string, n int) string {
		return sanitize.TruncateUTF8(strings.TrimSpace(c.Secrets.Redact(termtext.Clean(s))), n)
	}
	f := dispatch.CIFailure{Name: clean(chk.name, 200), Conclusion: chk.conclusion}
	if s := chk.status; s != nil {
		f.Kind, f.Summary, f.URL = "status", clean(s.GetDescription(), maxCISummary), s.GetTargetURL()
		return f
	}
	r := chk.run
	f.Kind, f.URL = "check", r.GetHTMLURL()
	if out := r.GetOutput(); out != nil {
		f.Title, f.Summary = clean(out.GetTitle(), 200), clean(out.GetSummary()+"\n\n"+out.GetText(), maxCISummary)
	}
	log := zerolog.Ctx(ctx).With().Str("check", chk.name).Logger()
	if r.GetOutput().GetAnnotationsCount() > 0 {
		anns, err := gh.Annotations(ctx, r.GetID())
		if err != nil {
			log.Warn().Err(err).Msg("read the check run's annotations")
		}
		for i, a := range anns {
			if i == maxCIAnnotations {
				break
			}
			f.Annotations = append(f.Annotations, dispatch.CIAnnotation{Path: clean(a.GetPath(), maxPathLen), Line: a.GetStartLine(),
				Level: a.GetAnnotationLevel(), Title: clean(a.GetTitle(), 200), Message: clean(a.GetMessage(), maxCIMessage)})
		}
	}
	if r.GetApp().GetSlug() == actionsApp {
		c.actionsLog(ctx, gh, r.GetID(), &f)
	}
	return f
}

// actionsLog adds an Actions job's workflow, failing step and the tail of
// its log to f.
func (c *core) actionsLog(ctx context.Context, gh hub.GitHub, id int64, f *dispatch.CIFailure) {
	log := zerolog.Ctx(ctx).With().Str("check", f.Name).Logger()
	f.Kind = "actions"
	job, err := gh.WorkflowJob(ctx, id)
	if err != nil {
		log.Warn().Err(err).Msg("read the Actions job")
		return
	}
	f.Workflow = termtext.Clean(job.GetWorkflowName())
	for _, s := range job.Steps {
		if slices.Contains(failingConclusions, s.GetConclusion()) {
			f.Step = termtext.Clean(s.GetName())
			break
		}
	}
	err = gh.JobLog(ctx, id, func(r io.Reader) error {
		tail, size, err := cilog.Tail(r, c.CILogBytes)
		f.LogTail, f.LogBytes = c.Secrets.Redact(tail), size
		return err
	})
	if err != nil {
		log.Warn().Err(err).Msg("read the Actions job's log")
	}
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
