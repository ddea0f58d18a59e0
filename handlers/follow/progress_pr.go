package follow

import (
	"cmp"
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// startOnPR opens the run's check run at once when the run works on a pull
// request (its kind's OnPR: revise, rebase, continue on a PR): the PR's
// head is known before the sandbox pushes anything, so the PR shows the
// run from its start rather than from its first push.
func (p *Progress) startOnPR(ctx context.Context) {
	if !lifecycle.KindOf(p.meta.Mode).OnPR || p.headSHA != "" {
		return
	}
	pr, err := p.gh.PullRequest(ctx, p.meta.Number)
	if err != nil {
		// A continue run of an issue's execute run: no PR yet; its check
		// run starts with its first push.
		zerolog.Ctx(ctx).Debug().Err(err).Msg("no pull request to hang the check run on yet")
		return
	}
	if pr.GetHead().GetRepo().GetFullName() != "" && pr.GetHead().GetRepo().GetFullName() != p.meta.Repo {
		return // never a check run on a fork's commit
	}
	p.mu.Lock()
	p.headSHA = pr.GetHead().GetSHA()
	p.last = dispatch.Progress{Stage: "queued", Message: "waiting for the sandbox to start"}
	p.lines = append(p.lines, "`queued` waiting for the sandbox to start")
	p.mu.Unlock()
	p.send(ctx)
}

// moveLocked follows the run to a commit it pushed: the check run on the
// old head is superseded and a new one opens on sha, so the PR's head
// always carries the run's progress. It reports whether the head moved.
// Callers hold p.mu.
func (p *Progress) moveLocked(sha string) bool {
	if sha == "" || sha == p.headSHA {
		return false
	}
	if p.checkRunID != 0 {
		p.superseded = append(p.superseded, p.checkRunID)
		p.checkRunID = 0
	}
	p.headSHA = sha
	return true
}

// closeSuperseded completes the check runs left on earlier heads.
func (p *Progress) closeSuperseded(ctx context.Context) {
	p.mu.Lock()
	ids, sha := p.superseded, p.headSHA
	p.superseded = nil
	p.mu.Unlock()
	for _, id := range ids {
		title := "Superseded by a newer push"
		summary := fmt.Sprintf("The run pushed %.12s; its progress goes on in the check run on that commit.", sha)
		if err := p.gh.UpdateCheckRun(ctx, id, github.UpdateCheckRunOptions{
			Name: p.r.d.CheckName, Status: github.String("completed"), Conclusion: github.String("neutral"),
			CompletedAt: &github.Timestamp{Time: p.r.d.Now()}, Output: &github.CheckRunOutput{Title: &title, Summary: &summary},
		}); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Int64("check_run", id).Msg("close superseded check run")
		}
	}
}

// detailsURL is the check run's "Details" link: the run's live page
// (which shows the receipt once it has ended), else its dashboard entry.
func (p *Progress) detailsURL() *string {
	if u := cmp.Or(p.r.d.Links.LiveURL(p.meta.TaskID), p.r.d.Links.EntryURL(p.meta.TaskID)); u != "" {
		return &u
	}
	return nil
}

// entryLink is the line of the check run's text that links to the run.
func (p *Progress) entryLink() string {
	if u := p.r.d.Links.LiveURL(p.meta.TaskID); u != "" {
		return fmt.Sprintf("\n\n[Watch this run live](%s)", u)
	}
	if u := p.r.d.Links.EntryURL(p.meta.TaskID); u != "" {
		return fmt.Sprintf("\n\n[This run on the dashboard](%s)", u)
	}
	return ""
}

// adopt finds the run's own unfinished check run on sha, opened before
// the bot restarted, so a run followed again keeps one check run. It
// returns 0 when there is none (or GitHub cannot say).
func (p *Progress) adopt(ctx context.Context, sha string) int64 {
	list, err := p.gh.CheckRuns(ctx, sha, p.r.d.CheckName)
	if err != nil {
		zerolog.Ctx(ctx).Debug().Err(err).Msg("list check runs to resume one")
		return 0
	}
	for _, c := range list {
		if c.GetExternalID() == p.externalID() && c.GetStatus() != "completed" {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.checkRunID == 0 && p.headSHA == sha {
				p.checkRunID = c.GetID()
			}
			return p.checkRunID
		}
	}
	return 0
}
