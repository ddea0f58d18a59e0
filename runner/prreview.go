package runner

import (
	"context"
	"fmt"
	"regexp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// A review run (ModeReview): the pull request's head checked out from
// refs/pull/N/head, which a fork's pull request has in the base
// repository too, with the runner's read-only token; the project's
// validation run on it; then one read-only agent pass that is given the
// pull request, its diff, what the checks said and the review threads,
// and whose final message is the review. Nothing is committed or pushed.

// prHeadRef is the only ref a review fetches.
var prHeadRef = regexp.MustCompile(`^refs/pull/[0-9]+/head$`)

// reviewHeadRef is where the mirror keeps the fetched head.
const reviewHeadRef = "refs/sandbox/review-head"

// FetchPRHead fetches ref (refs/pull/N/head) into the mirror and from
// there into the checkout, and returns the commit it names.
func (r *gitRemote) FetchPRHead(ctx context.Context, ref string) (string, error) {
	if !prHeadRef.MatchString(ref) {
		return "", fmt.Errorf("fetch: %q is not a pull request's head ref", ref)
	}
	if _, err := r.net(ctx, nil, "fetch", "--quiet", "--no-tags", "origin", "+"+ref+":"+reviewHeadRef); err != nil {
		return "", fmt.Errorf("fetch the pull request's head %s: %w", ref, err)
	}
	if _, err := r.tree.run(ctx, "", "fetch", "--quiet", "--no-tags", "origin", "+"+reviewHeadRef+":"+reviewHeadRef); err != nil {
		return "", fmt.Errorf("fetch the pull request's head into the checkout: %w", err)
	}
	return r.tree.RevParse(ctx, reviewHeadRef)
}

// checkoutPRHead checks out the commit the review is of: the order's
// head, or, when the pull request moved on since it was asked for, its
// head now (the receipt's head says which).
func (c *checkout) checkoutPRHead(g *Git) error {
	pr := c.order.PR
	now, err := g.FetchPRHead(c.work, pr.HeadRef)
	if err != nil {
		return err
	}
	at := pr.HeadSHA
	if _, err := g.RevParse(c.work, at); err != nil || now != at {
		c.log.Warn().Str("asked", pr.HeadSHA).Str("now", now).Msg("the pull request's head moved since the review was asked for; reviewing its head now")
		at = now
	}
	if err := g.Checkout(c.work, "sandbox-review", at); err != nil {
		return err
	}
	g.knowHead(at)
	c.res.HeadSHA = at
	return nil
}

// reviewPR runs the validation on the head, then the agent, read-only,
// whose final message is the review.
func (r *run) reviewPR() error {
	r.validate()
	if r.work.Err() != nil {
		return r.ag.interruption(nil)
	}
	data := r.promptData()
	data.PR = r.order.PR
	for _, name := range r.checkOrder {
		data.Validation = append(data.Validation, *r.checks[name])
	}
	prompt, err := render(r.opts.Templates, r.spec.prompt, data)
	if err != nil {
		return err
	}
	r.prog.emit(dispatch.Progress{Stage: "agent", Message: "reading the change and the validation's results"})
	out, err := r.ag.agent(agentSpec{Stage: "agent", Prompt: prompt, ReadOnly: true, Images: r.images.forAgent()})
	if err != nil {
		return err
	}
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	if out.FinalText == "" {
		return failed("the agent ended without writing a review")
	}
	r.res.PRReview = out.FinalText
	return nil
}

// shortRev is a commit id as people read it.
func shortRev(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// maxSuggestPatch bounds a suggest run's patch.
const maxSuggestPatch = 60 << 10

// suggestPatch is a suggest run's change as a patch from the pull
// request's head (start), one line of context, which the bot posts as
// suggested changes on those lines.
func suggestPatch(ctx context.Context, g *Git, start string) (string, error) {
	head, err := g.Head(ctx)
	if err != nil {
		return "", err
	}
	patch, err := g.raw(ctx, "", "diff", "-U1", "--no-ext-diff", "--no-textconv", "--no-color", start, head)
	if err != nil {
		return "", err
	}
	if len(patch) > maxSuggestPatch {
		return "", failed("the change is %d bytes, more than suggestions on a pull request can carry (%d)", len(patch), maxSuggestPatch)
	}
	return patch, nil
}
