package runner

import (
	"context"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/templates"
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

// reviewer is the pass, a value of its own built from what it reads and
// the one way it may run the agent (invoke, read-only, on its own budget).
type reviewer struct {
	cfg     sandboxcfg.ResolvedReview
	model   string // the run's model, when the review names none
	harness string
	budget  float64 // its share of the run's budget
	git     *Git
	baseSHA string
	// gitMu is the run's lock of the checkout (the periodic push's).
	gitMu     *sync.Mutex
	templates *templates.Set
	red       *Redactor
	prog      *reporter
	log       zerolog.Logger
	invoke    func(agentSpec) *agentOutcome
}

// review reads the change from the base to the checkout's HEAD with the
// prompt data data and returns the receipt's review.
func (v *reviewer) review(ctx context.Context, data PromptData) *dispatch.Review {
	rev := &dispatch.Review{Harness: v.harness, Model: firstNonEmpty(v.cfg.Model, v.model)}
	head, err := v.git.Head(ctx)
	if err != nil {
		rev.Error = "no review: " + err.Error()
		return rev
	}
	diff, err := v.git.Inspect(ctx, "diff", "--stat", "-p", "--no-ext-diff", "--no-textconv", "--no-color", v.baseSHA, head)
	if err != nil {
		rev.Error = "no review: the diff: " + err.Error()
		return rev
	}
	if len(diff) > maxReviewDiff {
		diff = diff[:maxReviewDiff] + "\n[… the diff goes on: read it with git diff]"
	}
	data.Diff = v.red.String(diff)
	prompt, err := render(v.templates, PromptReview, data)
	if err != nil {
		rev.Error = "no review: " + err.Error()
		return rev
	}
	v.prog.emit(dispatch.Progress{Stage: stageReview, Message: fmt.Sprintf("reviewer's pass (%s, up to $%.2f)", rev.Model, v.budget)})
	out := v.invoke(agentSpec{Stage: stageReview, Prompt: prompt, ReadOnly: true, Model: v.cfg.Model, CostCap: v.budget})
	rev.CostUSD = out.Usage.TotalCostUSD
	switch {
	case out.Stop == StopBudget:
		rev.Error = fmt.Sprintf("the reviewer passed its budget ($%.2f) and was stopped", v.budget)
	case !out.OK():
		rev.Error = clipString(v.red.String(out.Problem()), 500)
	case out.FinalText == "":
		rev.Error = "the reviewer wrote nothing"
	}
	rev.Text = clipString(v.red.String(out.FinalText), maxReviewText)
	if changed := v.discard(ctx, head); changed != "" {
		rev.Error = firstNonEmpty(rev.Error, changed)
	}
	return rev
}

// discard puts the checkout back at head: the reviewer changes nothing
// that is pushed. It says what it discarded.
func (v *reviewer) discard(ctx context.Context, head string) string {
	v.gitMu.Lock()
	defer v.gitMu.Unlock()
	now, _ := v.git.Head(ctx)
	dirty, _ := v.git.Dirty(ctx)
	if now == head && len(dirty) == 0 {
		return ""
	}
	v.log.Warn().Str("head", now).Int("files", len(dirty)).Msg("the reviewer changed the checkout; discarding it")
	if _, err := v.git.run(ctx, "", "reset", "--quiet", "--hard", head); err != nil {
		v.log.Error().Err(err).Msg("could not discard the reviewer's changes")
	}
	if _, err := v.git.run(ctx, "", "clean", "-fdq"); err != nil {
		v.log.Error().Err(err).Msg("could not discard the reviewer's files")
	}
	return fmt.Sprintf("the reviewer changed %d file(s) against its instructions; its changes were discarded", len(dirty))
}
