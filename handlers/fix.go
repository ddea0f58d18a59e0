package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/reviewtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// /fix: a writer asks, in a review thread (the bot's or a person's) or
// with what to change on the pull request, for a change on the pull
// request's branch where the work already is. The fix run has a token that
// writes contents; its runner starts from the commit the review was of,
// makes one commit, runs the checks before the PR (secret scan,
// dependencies) and the validation, and pushes only when all passed, as a
// fast-forward (never forced, never the default branch). If the branch
// moved since the review, the bot says so and does nothing.

// FixData is github/fixed: the answer to a /fix, in its thread.
type FixData struct {
	Marker string
	// SHA is the commit pushed to Branch ("" when the run changed
	// nothing); Summary is what the agent says it changed.
	SHA, Branch, Summary, LiveURL string
	Cost                          float64
	// Suggest: a fork's pull request, whose fix is Suggested suggested
	// changes on the diff and Outside changes that fall outside it.
	Suggest            bool
	Suggested, Outside int
}

// FixRefusedData is github/fix_refused: why a /fix changes nothing.
type FixRefusedData struct{ Reason string }

// fixRequest makes req a fix of pull request t's branch, or answers why
// not (a fork's branch, the default branch, a head that moved since the
// review).
func fixRequest(ctx context.Context, c *core, t thread, ev event, req *startRequest) bool {
	pr, err := t.pullRequest(ctx)
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("a fix asked for, but the pull request could not be read")
		return false
	}
	head, branch := pr.GetHead().GetSHA(), pr.GetHead().GetRef()
	root, rootErr := threadRoot(ctx, t.gh, t.number, ev.thread)
	reviewed, err := reviewedHead(ctx, c, t.gh, t.number, root)
	var why string
	switch {
	case rootErr != nil || err != nil:
		zerolog.Ctx(ctx).Error().AnErr("thread", rootErr).AnErr("reviews", err).Msg("a fix asked for, but its review could not be read")
		return false
	case reviewed != "" && reviewed != head:
		why = fmt.Sprintf("the branch moved since the review (it reviewed `%s`, the head is `%s` now): nothing was changed. `/review` reviews the new head", shortSHA(reviewed), shortSHA(head))
	case pr.GetHead().GetRepo().GetID() != pr.GetBase().GetRepo().GetID():
		// A fork's branch is not the App's to push to: the change comes
		// back as suggested changes its author can commit.
		req.Mode, branch = dispatch.ModeSuggest, ""
	case branch == t.repo.GetDefaultBranch() || branch == pr.GetBase().GetRef():
		why = fmt.Sprintf("the pull request's branch `%s` is the repository's default branch or its own base; a fix never pushes there", sanitize.Inline(branch, 100))
	}
	if why != "" {
		fixRefused(ctx, c, t, ev.thread, why)
		return false
	}
	req.Issue, req.Branch, req.BaseBranch, req.Head = t.number, branch, pr.GetBase().GetRef(), head
	req.Feedback = fixFeedback(root, ev.feedback())
	req.Vouch = vouchOf(t.sender, t.issue)
	if ev.thread != 0 {
		req.Inline = []int64{ev.thread}
	}
	return true
}

// fixRefused answers a /fix that changes nothing, in its thread when it
// has one.
func fixRefused(ctx context.Context, c *core, t thread, thread int64, why string) {
	zerolog.Ctx(ctx).Info().Str("reason", why).Msg("fix refused")
	body, err := c.Templates.Render("github/fix_refused", FixRefusedData{Reason: why})
	if err == nil {
		err = answerIn(ctx, t.gh, t.number, thread, strings.TrimSpace(body))
	}
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("answer the refused fix")
	}
}

// answerIn posts body in review thread thread, or on the pull request's
// conversation when there is none.
func answerIn(ctx context.Context, gh hub.GitHub, number int, thread int64, body string) error {
	if thread != 0 {
		return gh.ReplyToReviewComment(ctx, number, thread, body)
	}
	_, err := gh.Comment(ctx, number, body)
	return err
}

// threadRoot is the first comment of review thread id (nil for none).
func threadRoot(ctx context.Context, gh hub.GitHub, number int, id int64) (*github.PullRequestComment, error) {
	if id == 0 {
		return nil, nil
	}
	comments, err := gh.ReviewComments(ctx, number)
	if err != nil {
		return nil, err
	}
	for _, c := range comments {
		if c.GetID() == id {
			return c, nil
		}
	}
	return nil, nil
}

// reviewedHead is the commit the review a fix answers was of: the
// thread's review, or without a thread the App's newest review (its own
// account's: another App's review with a copied marker is text); "" when
// there is none to compare with.
func reviewedHead(ctx context.Context, c *core, gh hub.GitHub, number int, root *github.PullRequestComment) (string, error) {
	if root != nil && root.GetCommitID() != "" {
		return root.GetCommitID(), nil
	}
	reviews, err := gh.Reviews(ctx, number)
	if err != nil {
		return "", err
	}
	if root != nil {
		for _, rv := range reviews {
			if rv.GetID() == root.GetPullRequestReviewID() {
				return rv.GetCommitID(), nil
			}
		}
		return "", nil
	}
	login, err := c.LoadIdentity(ctx)
	if err != nil {
		return "", err
	}
	own := markers.Reviews(reviews, login)
	for i := len(own) - 1; i >= 0; i-- {
		if own[i].Marker.Mode == dispatch.ModeReview {
			return own[i].Review.GetCommitID(), nil
		}
	}
	return "", nil
}

// fixFeedback is what the fix run is asked: the thread's first comment
// and where it is, then the writer's words.
func fixFeedback(root *github.PullRequestComment, text string) string {
	var b strings.Builder
	if root != nil {
		fmt.Fprintf(&b, "The review comment on `%s` line %d:\n\n%s\n\n", root.GetPath(), root.GetLine(), root.GetBody())
	}
	if text = strings.TrimSpace(text); text != "" {
		b.WriteString(text)
	} else if root != nil {
		b.WriteString("Fix what it says.")
	}
	return b.String()
}

// postFixed answers a completed fix run: the commit it pushed, in the
// thread it was asked in (or on the pull request).
func (rp *resultPoster) postFixed(ctx context.Context, rc *runContext, res *dispatch.Result) error {
	ack, _ := markers.Last(rc.marked, markers.KindAck, rc.meta.TaskID)
	var thread int64
	if len(ack.Marker.Inline) > 0 {
		thread = ack.Marker.Inline[0]
	}
	d := FixData{Marker: markers.Marker{Kind: markers.KindResult, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue}.String(),
		Suggest: rc.meta.Mode == dispatch.ModeSuggest, Branch: sanitize.Inline(rc.branch, 200), Summary: strings.TrimSpace(res.PRSummary), LiveURL: rp.c.Receipts.LiveURL(rc.meta.TaskID), Cost: res.TokenUsage.TotalCostUSD}
	if len(res.Commits) > 0 && rc.meta.Mode == dispatch.ModeFix {
		d.SHA = shortSHA(res.HeadSHA)
	}
	if rc.meta.Mode == dispatch.ModeSuggest {
		var err error
		if d.Suggested, d.Outside, err = rp.postSuggestions(ctx, rc, res); err != nil {
			return err
		}
	}
	body, err := rp.c.Templates.Render("github/fixed", d)
	if err != nil {
		return err
	}
	if err := answerIn(ctx, rc.gh, rc.meta.Number, thread, strings.TrimSpace(body)); err != nil {
		return err
	}
	zerolog.Ctx(ctx).Info().Str("reply", "github/fixed").Int64("thread", thread).Str("sha", d.SHA).Msg("fix answered")
	return nil
}

// postSuggestions posts a suggest run's patch as one review of suggested
// changes on the lines of the pull request's diff (event COMMENT); a
// change on lines outside the diff, where GitHub takes no comment, is
// counted in outside and left out.
func (rp *resultPoster) postSuggestions(ctx context.Context, rc *runContext, res *dispatch.Result) (posted, outside int, err error) {
	files, err := rc.gh.PullFiles(ctx, rc.meta.Number)
	if err != nil {
		return 0, 0, err
	}
	d := reviewtext.DiffOf(files)
	all, outside := reviewtext.SuggestionsOf(res.PRPatch)
	var drafts []*github.DraftReviewComment
	for _, s := range all {
		if !s.Within(d) || len(drafts) >= reviewtext.MaxInlineComments {
			outside++
			continue
		}
		c := &github.DraftReviewComment{Path: github.String(s.Path), Line: github.Int(s.End), Side: github.String("RIGHT"), Body: github.String(s.Body())}
		if s.Start < s.End {
			c.StartLine, c.StartSide = github.Int(s.Start), github.String("RIGHT")
		}
		drafts = append(drafts, c)
	}
	marker := markers.Marker{Kind: markers.KindResult, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue}.String()
	if posted, err := reviewPosted(ctx, rc.gh, rc.meta.Number, marker); len(drafts) == 0 || err != nil || posted {
		return len(drafts), outside, err
	}
	body := marker + fmt.Sprintf("\n🔧 Suggested changes for this fork's pull request (%d): its author can commit each with one click.", len(drafts))
	if _, err := rc.gh.CreateReview(ctx, rc.meta.Number, res.HeadSHA, body, drafts); err != nil {
		return 0, 0, err
	}
	return len(drafts), outside, nil
}
