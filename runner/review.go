package runner

import (
	"context"
	"fmt"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The reviewer's pass (review.enabled): after validation, a fresh agent
// session, read-only, with its own share of the budget and optionally its
// own model, reads the issue, the approved plan and the diff and writes a
// short review for the PR body. It runs in the run's sandbox as the agent,
// which holds no token; whatever it changes in the checkout is discarded,
// so it never changes the code that is pushed.

const (
	stageReview = "review"
	// maxReviewDiff bounds the diff in the prompt; the reviewer reads the
	// rest from the checkout.
	maxReviewDiff = 60 << 10
	maxReviewText = 8000
)

func (r *run) review() {
	if !r.cfg.Review.Enabled || r.git == nil || !r.pushes || r.spec.pipeline != pipeImplement || r.work.Err() != nil {
		return
	}
	rev := &dispatch.Review{Harness: r.h.Name(), Model: firstNonEmpty(r.cfg.Review.Model, r.cfg.Model)}
	r.res.Review = rev
	head, err := r.git.Head(r.work)
	if err != nil {
		rev.Error = "no review: " + err.Error()
		return
	}
	diff, err := r.git.Inspect(r.work, "diff", "--stat", "-p", "--no-ext-diff", "--no-textconv", "--no-color", r.baseSHA, head)
	if err != nil {
		rev.Error = "no review: the diff: " + err.Error()
		return
	}
	if len(diff) > maxReviewDiff {
		diff = diff[:maxReviewDiff] + "\n[… the diff goes on: read it with git diff]"
	}
	data := r.promptData()
	data.Diff = r.red.String(diff)
	prompt, err := render(r.opts.Templates, PromptReview, data)
	if err != nil {
		rev.Error = "no review: " + err.Error()
		return
	}
	budget := r.budget * r.cfg.Review.BudgetShare
	r.prog.emit(dispatch.Progress{Stage: stageReview, Message: fmt.Sprintf("reviewer's pass (%s, up to $%.2f)", rev.Model, budget)})
	out := r.invoke(agentSpec{Stage: stageReview, Prompt: prompt, ReadOnly: true, Model: r.cfg.Review.Model, CostCap: budget})
	rev.CostUSD = out.Usage.TotalCostUSD
	switch {
	case out.Stop == StopBudget:
		rev.Error = fmt.Sprintf("the reviewer passed its budget ($%.2f) and was stopped", budget)
	case !out.OK():
		rev.Error = clipString(r.red.String(out.Problem()), 500)
	case out.FinalText == "":
		rev.Error = "the reviewer wrote nothing"
	}
	rev.Text = clipString(r.red.String(out.FinalText), maxReviewText)
	if changed := r.discardReviewChanges(r.work, head); changed != "" {
		rev.Error = firstNonEmpty(rev.Error, changed)
	}
}

// discardReviewChanges puts the checkout back at head: the reviewer
// changes nothing that is pushed. It says what it discarded.
func (r *run) discardReviewChanges(ctx context.Context, head string) string {
	r.gitMu.Lock()
	defer r.gitMu.Unlock()
	now, _ := r.git.Head(ctx)
	dirty, _ := r.git.Dirty(ctx)
	if now == head && len(dirty) == 0 {
		return ""
	}
	r.log.Warn().Str("head", now).Int("files", len(dirty)).Msg("the reviewer changed the checkout; discarding it")
	if _, err := r.git.run(ctx, "", "reset", "--quiet", "--hard", head); err != nil {
		r.log.Error().Err(err).Msg("could not discard the reviewer's changes")
	}
	if _, err := r.git.run(ctx, "", "clean", "-fdq"); err != nil {
		r.log.Error().Err(err).Msg("could not discard the reviewer's files")
	}
	return fmt.Sprintf("the reviewer changed %d file(s) against its instructions; its changes were discarded", len(dirty))
}
