// Package markers is the bot's memory on GitHub: the hidden marker its
// own comments and pull request bodies carry (`<!-- sandbox-bot:{json} -->`),
// from which a restarted bot or another replica knows which run started
// and ended, which plan was approved and what a writer vouched for. Only
// a marker the App's own bot account wrote is state; anyone else's is
// text.
package markers

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/rank"
)

// Marker is the hidden state the bot leaves in its own comments and PR
// bodies, as `<!-- sandbox-bot:{json} -->`. It is how a restarted bot (or
// another replica) knows which plan was approved, how many rounds a plan
// had, and which result was already posted.
type Marker struct {
	Kind   string        `json:"kind"` // ack, plan, pr, result, failure, progress, aborted
	TaskID string        `json:"task"`
	Mode   dispatch.Mode `json:"mode,omitempty"`
	Round  int           `json:"round,omitempty"`
	Issue  int           `json:"issue,omitempty"`
	Branch string        `json:"branch,omitempty"`
	// Attempt counts continue runs of one task.
	Attempt int `json:"attempt,omitempty"`
	// Cost is a plan round's cost in dollars, which the next round adds to
	// the issue's cost so far.
	Cost float64 `json:"cost,omitempty"`
	// Inline are review comments: on a revise run's acknowledgement, the
	// inline comments it was asked to address; on the bot's reply in a
	// review thread, the ones the reply answers (inline_replies.go).
	Inline []int64 `json:"inline,omitempty"`
	// Upto is, on a revise run's acknowledgement, the newest comment of
	// the conversation its feedback was read up to (batch_feedback.go).
	Upto int64 `json:"upto,omitempty"`
	// PlanSHA is, on a plan comment, the digest of the plan the run wrote
	// (agentsession.PlanDigest): the execute run resumes the plan run's
	// session only if the session archive names the same plan.
	PlanSHA string `json:"plan_sha,omitempty"`
	// Files are, on a plan comment, the files and areas the plan names
	// (vetted): the runs that implement it compare the change with them.
	Files []dispatch.PlanFile `json:"files,omitempty"`
	// Images are, on an acknowledgement, the images the bot found for the
	// run: given to the agent, or not and why (images.go).
	Images []ImageNote `json:"images,omitempty"`
	// CIHead and CIChecks are, on a CI fix run's acknowledgement, the head
	// commit whose checks failed and their names; on the bot's CI replies
	// (ci_base_failing, ci_gave_up) the head they answer. The fix runs on a
	// PR are counted by them (ci.go).
	CIHead   string   `json:"ci_head,omitempty"`
	CIChecks []string `json:"ci_checks,omitempty"`
	// Head is, on the marker of a run's end, the commit it left its
	// branch at: the App's own push (ci.go).
	Head string `json:"head,omitempty"`
	// Vouch is, on the acknowledgement of a run a writer's label or
	// mention started, what they vouched for of an outsider's issue
	// (vouch.go).
	Vouch *Vouch `json:"vouch,omitempty"`
	// Set, Variant and Variants are, on the acknowledgement of an
	// /approve --attempts N and on an attempt that could not start, the
	// approval's task id, the attempt and how many (attempts.go).
	Set      string `json:"set,omitempty"`
	Variant  int    `json:"variant,omitempty"`
	Variants int    `json:"variants,omitempty"`
	// Attempts and Picked are, on the PR body's attempts section, every
	// attempt's row and the one the PR's branch carries (pick.go).
	Attempts []rank.Row `json:"attempts,omitempty"`
	Picked   int        `json:"picked,omitempty"`
	// By is who picked it ("" when the checks did).
	By string `json:"by,omitempty"`
}

// Marker kinds.
const (
	KindAck      = "ack"
	KindPlan     = "plan"
	KindPR       = "pr"
	KindResult   = "result"
	KindFailure  = "failure"
	KindProgress = "progress"
	KindAborted  = "aborted"
	// KindAbortRequested marks the reply to /abort, before the run ends.
	KindAbortRequested = "abort-requested"
	// KindQueued marks the reply that a run waits in the queue.
	KindQueued = "queued"
	// KindInlineReply marks the bot's reply on inline review comments a
	// revise run addressed.
	KindInlineReply = "inline-reply"
	// KindCI marks the bot's word on a PR's failing checks that starts no
	// run: they fail on the base too, or the fix runs are used up.
	KindCI = "ci"
	// KindOverBudget marks the refusal of a run whose budget did not fit
	// what was left of the month (budget.go).
	KindOverBudget = "over-budget"
	// KindAttemptNotStarted marks that an attempt of an /approve
	// --attempts N could not start: it has ended, last in the ranking.
	KindAttemptNotStarted = "attempt-not-started"
	// KindAttempts marks the PR body's attempts section.
	KindAttempts = "attempts"
	// KindPicked marks the reply to /pick.
	KindPicked = "picked"
	// KindPreview marks the comment that links a pull request's preview;
	// it is edited in place when the preview ends.
	KindPreview = "preview"
)

var markerRE = regexp.MustCompile(`<!-- sandbox-bot:(\{.*?\}) -->`)

// String renders the marker for embedding in a comment.
func (m Marker) String() string {
	b, _ := json.Marshal(m)
	return "<!-- sandbox-bot:" + string(b) + " -->"
}

// Parse returns the marker in a body, if any.
func Parse(body string) (Marker, bool) {
	sm := markerRE.FindStringSubmatch(body)
	if sm == nil {
		return Marker{}, false
	}
	var m Marker
	if err := json.Unmarshal([]byte(sm[1]), &m); err != nil {
		return Marker{}, false
	}
	return m, true
}

// Plan text sits between these in the plan comment, so /approve takes
// exactly what was shown, not the surrounding instructions.
const (
	PlanStart = "<!-- sandbox-bot:plan-start -->"
	PlanEnd   = "<!-- sandbox-bot:plan-end -->"
)

// PlanText is the plan a plan comment shows (between PlanStart and
// PlanEnd), "" when it shows none.
func PlanText(body string) string {
	_, after, ok := strings.Cut(body, PlanStart)
	if !ok {
		return ""
	}
	plan, _, _ := strings.Cut(after, PlanEnd)
	return strings.TrimSpace(plan)
}

// Comment is one of the bot's comments with its marker.
type Comment struct {
	Comment *github.IssueComment
	Marker  Marker
}

// Comments filters comments to the marked ones this App's bot
// account wrote. A marker anyone else wrote (a person, another App, a
// quoted copy of the bot's own) is text, never state: otherwise another
// App's comment could supply the plan a writer's /approve executes.
func Comments(comments []*github.IssueComment, botLogin string) []Comment {
	var out []Comment
	for _, c := range comments {
		if !IsOwnBot(c.GetUser(), botLogin) {
			continue
		}
		if m, ok := Parse(c.GetBody()); ok {
			out = append(out, Comment{Comment: c, Marker: m})
		}
	}
	return out
}

// Review is one of the bot's pull request reviews with its marker.
type Review struct {
	Review *github.PullRequestReview
	Marker Marker
}

// Reviews filters reviews to the marked ones this App's bot account
// wrote, as Comments does for comments: a marker in anyone else's review
// is text.
func Reviews(reviews []*github.PullRequestReview, botLogin string) []Review {
	var out []Review
	for _, rv := range reviews {
		if !IsOwnBot(rv.GetUser(), botLogin) {
			continue
		}
		if m, ok := Parse(rv.GetBody()); ok {
			out = append(out, Review{Review: rv, Marker: m})
		}
	}
	return out
}

// IsAgentPR tells whether pr is one this App opened for an issue: its
// author is the App's bot account, its head branch is an agent/ branch in
// the base repository itself (never a fork, whose owner controls the
// branch), and its body carries the App's PR marker. It returns the issue.
func IsAgentPR(pr *github.PullRequest, botLogin string) (int, bool) {
	if !IsOwnBot(pr.GetUser(), botLogin) || !strings.HasPrefix(pr.GetHead().GetRef(), dispatch.BranchPrefix) {
		return 0, false
	}
	head, base := pr.GetHead().GetRepo(), pr.GetBase().GetRepo()
	if head == nil || base == nil || head.GetFork() {
		return 0, false
	}
	if head.GetID() != 0 && base.GetID() != 0 {
		if head.GetID() != base.GetID() {
			return 0, false
		}
	} else if head.GetFullName() == "" || !strings.EqualFold(head.GetFullName(), base.GetFullName()) {
		return 0, false
	}
	m, ok := Parse(pr.GetBody())
	if !ok || m.Kind != KindPR {
		return 0, false
	}
	return m.Issue, true
}

// IsBotLogin reports whether u is a bot account (an App's or a machine
// user GitHub marks as one).
func IsBotLogin(u *github.User) bool {
	return u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]")
}

// Last returns the newest marked comment of a kind (and task, if not
// empty).
func Last(marked []Comment, kind, taskID string) (Comment, bool) {
	for i := len(marked) - 1; i >= 0; i-- {
		m := marked[i]
		if m.Marker.Kind == kind && (taskID == "" || m.Marker.TaskID == taskID) {
			return m, true
		}
	}
	return Comment{}, false
}

// Vouch is, on a run's request and its acknowledgement's marker, who
// vouched for an outsider's issue and a digest of its title and body at
// that moment.
type Vouch struct {
	By     string `json:"by"`
	Digest string `json:"digest"`
}

// ImageNote is one image the bot found for a run: Why is empty when the
// agent was given it, else the reason it was not.
type ImageNote struct {
	Name string `json:"name"`
	Why  string `json:"why,omitempty"`
}

// IsOwnBot reports whether u is this App's bot account (login).
func IsOwnBot(u *github.User, login string) bool {
	return login != "" && strings.EqualFold(u.GetLogin(), login)
}
