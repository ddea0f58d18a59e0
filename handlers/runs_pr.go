package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// openPR reports a completed execute or continue run: that nothing
// changed, or the pull request it opens (or updates) with the
// repository's labels and reviewers.
func (r *Runs) openPR(ctx context.Context, client *github.Client, rc *runContext, res *dispatch.Result, prog *progress) error {
	log := zerolog.Ctx(ctx)
	if res.Branch == "" || len(res.Commits) == 0 {
		prog.complete(ctx, "neutral", "No changes", "The agent finished without changing anything.", res)
		r.c.setState(ctx, client, rc.owner, rc.repo, rc.meta.Number, LabelDone)
		rcpt := rc.receipt(res)
		return r.c.reply(ctx, client, rc.owner, rc.repo, rc.meta.Number, "github/no_changes", NoChangesData{Receipt: rcpt, Marker: rcpt.marker(KindResult)})
	}
	cfg := r.configOf(ctx, client, rc)
	rcpt := rc.receipt(res)
	data := PRBodyData{Receipt: rcpt, Marker: rcpt.marker(KindPR), MediaBase: r.mediaBase(rc, res), History: r.prHistory(ctx, client, rc, res)}
	if plan, ok := lastMarked(rc.marked, KindPlan, ""); ok {
		data.PlanURL = plan.Comment.GetHTMLURL()
	}
	body, err := r.c.Templates.Render("github/pr_body", data)
	if err != nil {
		return err
	}
	issue, _, err := client.Issues.Get(ctx, rc.owner, rc.repo, rc.issue)
	if err != nil {
		return fmt.Errorf("read issue #%d: %w", rc.issue, err)
	}
	base := cfg.base
	title := issue.GetTitle()
	pr, err := r.findOrCreatePR(ctx, client, rc, res.Branch, base, title, body, cfg.draft)
	if err != nil {
		return err
	}
	if len(cfg.labels) > 0 {
		if _, _, err := client.Issues.AddLabelsToIssue(ctx, rc.owner, rc.repo, pr.GetNumber(), cfg.labels); err != nil {
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
		if _, _, err := client.PullRequests.RequestReviewers(ctx, rc.owner, rc.repo, pr.GetNumber(), github.ReviewersRequest{Reviewers: users, TeamReviewers: teams}); err != nil {
			log.Warn().Err(err).Msg("request reviewers")
		}
	}
	prog.attach(res.HeadSHA)
	prog.complete(ctx, "success", "Pull request opened", res.PRSummary, res)
	r.c.setState(ctx, client, rc.owner, rc.repo, rc.meta.Number, LabelDone)
	return r.c.reply(ctx, client, rc.owner, rc.repo, rc.meta.Number, "github/pr_opened", PROpenedData{
		Receipt: rcpt, PRURL: pr.GetHTMLURL(), PRNumber: pr.GetNumber(),
		Marker: Marker{Kind: KindResult, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue, Branch: res.Branch}.String(),
	})
}

// findOrCreatePR opens the PR, or updates the one a previous attempt (a
// continue run, or a post interrupted by a restart) already opened.
func (r *Runs) findOrCreatePR(ctx context.Context, client *github.Client, rc *runContext, head, base, title, body string, draft bool) (*github.PullRequest, error) {
	existing, _, err := client.PullRequests.List(ctx, rc.owner, rc.repo, &github.PullRequestListOptions{Head: rc.owner + ":" + head, State: "open"})
	if err != nil {
		return nil, fmt.Errorf("look for an open PR from %s: %w", head, err)
	}
	if len(existing) > 0 {
		pr := existing[0]
		pr, _, err = client.PullRequests.Edit(ctx, rc.owner, rc.repo, pr.GetNumber(), &github.PullRequest{Body: &body})
		if err != nil {
			return nil, fmt.Errorf("update PR body: %w", err)
		}
		return pr, nil
	}
	pr, _, err := client.PullRequests.Create(ctx, rc.owner, rc.repo, &github.NewPullRequest{
		Title: &title, Head: &head, Base: &base, Body: &body, Draft: &draft,
	})
	if err != nil {
		return nil, fmt.Errorf("open PR %s -> %s: %w", head, base, err)
	}
	return pr, nil
}

type prSettings struct {
	base      string
	draft     bool
	labels    []string
	reviewers []string
}

// configOf re-reads the PR settings from the configuration at the default
// branch; failures fall back to plain defaults (the run already happened).
func (r *Runs) configOf(ctx context.Context, client *github.Client, rc *runContext) prSettings {
	repo, _, err := client.Repositories.Get(ctx, rc.owner, rc.repo)
	if err != nil {
		return prSettings{base: "main"}
	}
	s := prSettings{base: repo.GetDefaultBranch()}
	cfg, err := r.c.loadConfig(ctx, client, rc.owner, rc.repo, "", sandboxcfg.Flags{})
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
