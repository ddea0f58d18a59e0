package handlers

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/reviewtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// Reviews of anyone's pull request (/review, a mention asking for one,
// review.auto): a review run is a run like any other (the PR's lock, the
// caps and the queue, a budget, the live page, the receipt), read-only
// with a contents:read token. Its runner checks the PR's head out through
// refs/pull/N/head (a fork's too), runs the validation and hands the agent
// the PR, its diff, the validation and the review threads; the bot posts
// the agent's final message as one review, event COMMENT.

// ReviewData is github/review: the body of the review the bot posts.
type ReviewData struct {
	Marker string
	// Summary is the agent's review without its inline comments, made
	// safe to post; Inline counts those posted on the diff.
	Summary string
	Inline  int
	// Checks are the validation's results.
	Checks []ReviewCheck
	// Head is the commit reviewed (short), LiveURL the run's page, Cost
	// and Seconds what it took.
	Head, LiveURL string
	Cost, Seconds float64
}

// ReviewCheck is one validation check in the review's table.
type ReviewCheck struct {
	Name, Command string
	Passed        bool
	Seconds       string
	// Failing are the lines of a failed check's output that say what
	// failed.
	Failing []string
}

// asksReview reports whether a mention's words ask for a review.
func asksReview(text string) bool {
	return strings.Contains(strings.ToLower(text), "review")
}

// reviewRequest makes req a review of the pull request t: its base
// branch (whose configuration the run reads), the writer's focus, and the
// vouch for the PR's text as the writer's event saw it.
func reviewRequest(ctx context.Context, t thread, ev event, req *startRequest) bool {
	pr, err := t.pullRequest(ctx)
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("a review asked for, but the pull request could not be read")
		return false
	}
	req.Mode, req.Issue, req.BaseBranch, req.Feedback = dispatch.ModeReview, t.number, pr.GetBase().GetRef(), ev.feedback()
	req.Vouch = vouchOf(t.sender, t.issue)
	return true
}

// reviewOrder is what a review run is given of the pull request: its
// head, its diff and the review threads, of which only writers' words (and
// the App's) are passed on.
func (a agentRun) reviewOrder(ctx context.Context, gh hub.GitHub, req startRequest) (*dispatch.PRReview, error) {
	pr, err := gh.PullRequest(ctx, req.Number)
	if err != nil {
		return nil, err
	}
	files, err := gh.PullFiles(ctx, req.Number)
	if err != nil {
		return nil, err
	}
	threads, err := a.reviewThreads(ctx, gh, req.Number)
	if err != nil {
		return nil, err
	}
	return &dispatch.PRReview{
		HeadRef: fmt.Sprintf("refs/pull/%d/head", req.Number), HeadSHA: pr.GetHead().GetSHA(),
		Diff: reviewtext.UnifiedDiff(files, reviewtext.MaxReviewDiff), Threads: threads, Focus: req.Feedback,
	}, nil
}

// reviewThreads are the pull request's review comments so far as text,
// oldest first: "path:line @author: body". Comments by people without
// write access are left out, as on issues.
func (a agentRun) reviewThreads(ctx context.Context, gh hub.GitHub, number int) (string, error) {
	comments, err := gh.ReviewComments(ctx, number)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range comments {
		who := c.GetUser().GetLogin()
		if !markers.IsBotLogin(c.GetUser()) {
			ok, err := a.c.canWrite(ctx, gh, who)
			if err != nil {
				return "", err
			}
			if !ok {
				continue
			}
		}
		reply := ""
		if c.GetInReplyTo() != 0 {
			reply = " (reply)"
		}
		fmt.Fprintf(&b, "%s:%d @%s%s: %s\n", c.GetPath(), c.GetLine(), who, reply, strings.ReplaceAll(strings.TrimSpace(c.GetBody()), "\n", "\n    "))
		if b.Len() > 20000 {
			b.WriteString("[… more threads on the pull request]\n")
			break
		}
	}
	return b.String(), nil
}

// postReview posts a completed review run's review: one review of the
// commit it ran on, event COMMENT, with the agent's "path:line:" lines
// that fall in the diff as inline comments and the rest, the validation
// table, cost, duration and the run's page as its body. A review of this
// run posted already (a retry after a restart) is not posted again.
func (rp *resultPoster) postReview(ctx context.Context, rc *runContext, res *dispatch.Result) error {
	marker := markers.Marker{Kind: markers.KindResult, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue}.String()
	if posted, err := reviewPosted(ctx, rc.gh, rc.meta.Number, marker); err != nil || posted {
		return err
	}
	files, err := rc.gh.PullFiles(ctx, rc.meta.Number)
	if err != nil {
		return err
	}
	// The commit the runner checked out and validated: the head asked
	// for, or the one the pull request moved on to before the clone.
	head := cmp.Or(res.HeadSHA, rc.meta.HeadSHA)
	inline, summary := reviewtext.Split(sanitize.TruncateUTF8(rp.c.Secrets.Redact(res.PRReview), reviewtext.MaxReviewText), reviewtext.DiffOf(files), reviewtext.MaxInlineComments)
	body, err := rp.c.Templates.Render("github/review", reviewData(marker, summary, len(inline), head, res, rp.c.Receipts.LiveURL(rc.meta.TaskID)))
	if err != nil {
		return err
	}
	drafts := make([]*github.DraftReviewComment, 0, len(inline))
	for _, c := range inline {
		drafts = append(drafts, &github.DraftReviewComment{Path: github.String(c.Path), Line: github.Int(c.Line), Side: github.String("RIGHT"),
			Body: github.String(strings.TrimSpace(sanitize.Markdown(c.Body, reviewtext.MaxInlineBytes)))})
	}
	id, err := rc.gh.CreateReview(ctx, rc.meta.Number, head, strings.TrimSpace(sanitize.TruncateUTF8(body, reviewtext.MaxReviewBody)), drafts)
	if err != nil {
		return err
	}
	zerolog.Ctx(ctx).Info().Str("reply", "github/review").Int64("review", id).Int("inline", len(drafts)).Msg("review posted")
	return nil
}

// The review body's parts are bounded so that together they stay within
// GitHub's limit: the summary (maxSummaryBytes), a table row per check (at
// most maxReviewChecks) and the failing lines of the first
// maxFailingShown failed checks.
const (
	maxReviewChecks = 50
	maxFailingShown = 5
)

// reviewPosted reports whether the App's review with marker is on the
// pull request already (a retry after a restart posts it once).
func reviewPosted(ctx context.Context, gh hub.GitHub, number int, marker string) (bool, error) {
	reviews, err := gh.Reviews(ctx, number)
	if err != nil {
		return false, err
	}
	for _, rv := range reviews {
		if strings.Contains(rv.GetBody(), marker) {
			zerolog.Ctx(ctx).Info().Int64("review", rv.GetID()).Msg("the review is posted already")
			return true, nil
		}
	}
	return false, nil
}

// reviewData is the review's body from the run's receipt.
func reviewData(marker, summary string, inline int, head string, res *dispatch.Result, live string) ReviewData {
	d := ReviewData{Marker: marker, Summary: strings.TrimSpace(sanitize.Markdown(termtext.Clean(summary), sanitize.MaxSummaryBytes)), Inline: inline,
		Head: shortSHA(head), Cost: res.TokenUsage.TotalCostUSD, Seconds: res.DurationSeconds, LiveURL: live}
	shown := 0
	for _, c := range res.Validation[:min(len(res.Validation), maxReviewChecks)] {
		rc := ReviewCheck{Name: sanitize.Inline(termtext.Clean(c.Name), 100), Command: sanitize.Inline(termtext.Clean(c.Command), 200), Passed: c.Passed,
			Seconds: fmt.Sprintf("%.0fs", c.DurationSeconds)}
		if !c.Passed && shown < maxFailingShown {
			shown++
			for _, l := range reviewtext.FailingLines(termtext.Clean(c.OutputTail), 8) {
				// Shown in a fence: nothing in it closes the fence or passes
				// for one of the bot's markers.
				rc.Failing = append(rc.Failing, strings.NewReplacer("```", "ˋˋˋ", "<!--", "<!"+sanitize.Zwsp+"--").Replace(l))
			}
		}
		d.Checks = append(d.Checks, rc)
	}
	return d
}

// reviewState is the state a review leaves its pull request in: on the
// App's own PR the run table's (next), on another's none, whose labels
// are not the App's to set.
func (rp *resultPoster) reviewState(ctx context.Context, rc *runContext, next lifecycle.State) lifecycle.State {
	login, err := rp.c.LoadIdentity(ctx)
	if err != nil {
		return ""
	}
	pr, err := rc.gh.PullRequest(ctx, rc.meta.Number)
	if err != nil {
		return ""
	}
	if _, ours := markers.IsAgentPR(pr, login); ours {
		return next
	}
	return ""
}
