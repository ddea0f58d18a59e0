package handlers

import (
	"context"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// openPR reports a completed execute or continue run that pushed commits:
// the pull request it opens (or updates) and the comment that links it
// (the result), then the issue's state and the PR's labels and reviewers.
func (rp *resultPoster) openPR(ctx context.Context, rc *runContext, res *dispatch.Result, prog *follow.Progress, state lifecycle.State) error {
	cfg := rp.configOf(ctx, rc)
	rcpt := rc.receipt(res)
	data := PRBodyData{Receipt: rcpt, Marker: rcpt.marker(markers.KindPR), MediaBase: rp.mediaBase(rc, res), History: rp.prHistory(ctx, rc, res)}
	if plan, ok := markers.Last(rc.marked, markers.KindPlan, ""); ok {
		data.PlanURL = plan.Comment.GetHTMLURL()
	}
	checks, err := rp.c.renderChecks(res)
	if err != nil {
		return err
	}
	data.Checks, data.Attempts = checks, rc.attempts
	body, err := rp.c.Templates.Render("github/pr_body", data)
	if err != nil {
		return err
	}
	issue, err := rc.gh.Issue(ctx, rc.issue)
	if err != nil {
		return err
	}
	pr, err := rp.findOrCreatePR(hub.WithWriteClass(ctx, hub.WriteResult), rc, res.Branch, cfg.base, issue.GetTitle(), body, cfg.draft)
	if err != nil {
		return err
	}
	prog.Attach(res.HeadSHA)
	post := func(ctx context.Context) error {
		return rp.c.reply(ctx, rc.gh, rc.meta.Number, "github/pr_opened", PROpenedData{
			Receipt: rcpt, PRURL: pr.GetHTMLURL(), PRNumber: pr.GetNumber(),
			Marker: markers.Marker{Kind: markers.KindResult, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue, Branch: res.Branch}.String(),
		})
	}
	return rp.show(ctx, rc, res, prog, state, closing{"success", "Pull request opened", res.PRSummary}, post, func(ctx context.Context) {
		rp.labelAndAsk(ctx, rc, pr.GetNumber(), cfg)
	})
}

// labelAndAsk puts the repository's labels on the agent's pull request and
// asks its reviewers; a failure costs only that.
func (rp *resultPoster) labelAndAsk(ctx context.Context, rc *runContext, number int, cfg prSettings) {
	log := zerolog.Ctx(ctx)
	if len(cfg.labels) > 0 {
		if err := rc.gh.AddLabels(ctx, number, cfg.labels...); err != nil {
			log.Warn().Err(err).Msg("label PR")
		}
	}
	if len(cfg.reviewers) > 0 {
		var users, teams []string
		for _, rv := range cfg.reviewers {
			if _, team, ok := strings.Cut(rv, "/"); ok {
				teams = append(teams, team)
			} else {
				users = append(users, rv)
			}
		}
		if err := rc.gh.RequestReviewers(ctx, number, users, teams); err != nil {
			log.Warn().Err(err).Msg("request reviewers")
		}
	}
}

// findOrCreatePR opens the PR, or updates the one a previous attempt (a
// continue run, or a post interrupted by a restart) already opened.
func (rp *resultPoster) findOrCreatePR(ctx context.Context, rc *runContext, head, base, title, body string, draft bool) (*github.PullRequest, error) {
	owner, _, _ := strings.Cut(rc.meta.Repo, "/")
	existing, err := rc.gh.OpenPullRequests(ctx, owner+":"+head, "")
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		return rc.gh.EditPullRequestBody(ctx, existing[0].GetNumber(), body)
	}
	return rc.gh.CreatePullRequest(ctx, &github.NewPullRequest{Title: &title, Head: &head, Base: &base, Body: &body, Draft: &draft})
}

type prSettings struct {
	base      string
	draft     bool
	labels    []string
	reviewers []string
}

// configOf re-reads the PR settings from the configuration at the default
// branch; failures fall back to plain defaults (the run already happened).
func (rp *resultPoster) configOf(ctx context.Context, rc *runContext) prSettings {
	repo, err := rc.gh.Repository(ctx)
	if err != nil {
		return prSettings{base: "main"}
	}
	s := prSettings{base: repo.GetDefaultBranch()}
	cfg, err := rp.c.loadConfig(ctx, rc.meta.InstallationID, rc.gh, "", sandboxcfg.Flags{})
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("re-read configuration for PR settings")
		return s
	}
	if cfg.Branch != "" {
		s.base = cfg.Branch
	}
	s.draft, s.labels, s.reviewers = cfg.PR.Draft, cfg.PR.Labels, cfg.PR.Reviewers
	return s
}
