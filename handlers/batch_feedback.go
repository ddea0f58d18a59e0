package handlers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// feedbackItem is one piece of a writer's feedback on an agent PR.
type feedbackItem struct {
	at     time.Time
	author string
	// what it is: "review" (a review's body), "inline" (a review
	// comment on a line) or "comment" (/revise or a mention in the PR's
	// conversation).
	kind  string
	state string // a review's state
	// inline comments: where, and the comment's id (for the reply).
	id         int64
	path, hunk string
	line       int
	body       string
	// flags are the one-off flags of a /revise (--budget 2 ...).
	flags sandboxcfg.Flags
	// ref is where GitHub renders it, for its images (images.go).
	ref hub.BodyRef
	// raw is the text as written.
	raw string
}

// feedback is what a revise run is asked to address.
type feedback []feedbackItem

func (f feedback) empty() bool { return len(f) == 0 }

// text is the feedback for the work order, each piece attributed, inline
// ones with their file, line and diff. A lone /revise is its text alone,
// as the writer typed it.
func (f feedback) text() string {
	if len(f) == 1 && f[0].kind == "comment" {
		return f[0].body
	}
	parts := make([]string, 0, len(f))
	for _, it := range f {
		switch it.kind {
		case "review":
			state := strings.ReplaceAll(strings.ToLower(it.state), "_", " ")
			parts = append(parts, fmt.Sprintf("Review by @%s (%s):\n%s", it.author, state, it.body))
		case "inline":
			parts = append(parts, fmt.Sprintf("Inline comment by @%s. %s%s", it.author, inlineContext(it.path, it.line, it.hunk), it.body))
		default:
			parts = append(parts, fmt.Sprintf("@%s wrote:\n%s", it.author, it.body))
		}
	}
	return strings.Join(parts, "\n\n")
}

// flags are the newest one-off flags a /revise in the batch gave: the
// batch is one run, so one set applies.
func (f feedback) flags() sandboxcfg.Flags {
	for i := len(f) - 1; i >= 0; i-- {
		if f[i].flags != (sandboxcfg.Flags{}) {
			return f[i].flags
		}
	}
	return sandboxcfg.Flags{}
}

// images are the feedback's texts that may hold images, in order.
func (f feedback) images() []imageSource {
	var out []imageSource
	for _, it := range f {
		what := map[string]string{"review": "a review", "inline": "an inline comment"}[it.kind]
		if what == "" {
			what = "a comment"
		}
		out = append(out, imageSource{What: what + " by " + it.author, Ref: it.ref, markdown: it.raw})
	}
	return withImages(out)
}

// inlineIDs are the inline comments the run is asked to address: it
// replies on them when it is done (inline_replies.go).
func (f feedback) inlineIDs() []int64 {
	var ids []int64
	for _, it := range f {
		if it.kind == "inline" {
			ids = append(ids, it.id)
		}
	}
	return ids
}

// pendingFeedback collects what writers asked of an agent PR that no run
// took yet: /revise comments (or mentions) newer than those the last
// revise run read (its acknowledgement's Upto), review bodies submitted
// since that acknowledgement, and every inline comment the bot has not
// replied on. Non-writers' text never reaches the agent. upto is the
// newest conversation comment read, for this run's acknowledgement.
func (bs *batches) pendingFeedback(ctx context.Context, gh hub.GitHub, number int) (_ feedback, upto int64, _ error) {
	login, err := bs.c.LoadIdentity(ctx)
	if err != nil {
		return nil, 0, err
	}
	comments, err := gh.Comments(ctx, number)
	if err != nil {
		return nil, 0, err
	}
	var since time.Time
	var sinceID int64
	for _, m := range markers.Comments(comments, login) {
		if m.Marker.Kind == markers.KindAck && m.Marker.Mode == dispatch.ModeRevise {
			since, sinceID = m.Comment.GetCreatedAt().Time, cmp.Or(m.Marker.Upto, m.Comment.GetID())
		}
	}
	for _, c := range comments {
		upto = max(upto, c.GetID())
	}
	var items feedback
	slug := strings.TrimSuffix(login, "[bot]")
	for _, c := range comments {
		if c.GetID() <= sinceID || markers.IsBotLogin(c.GetUser()) {
			continue
		}
		if text, flags, ok := reviseText(c.GetBody(), slug, true); ok {
			items = append(items, feedbackItem{at: c.GetCreatedAt().Time, author: c.GetUser().GetLogin(), kind: "comment", body: text, flags: flags,
				ref: hub.BodyRef{Kind: hub.BodyComment, Number: number, ID: c.GetID()}, raw: c.GetBody()})
		}
	}
	reviews, err := gh.Reviews(ctx, number)
	if err != nil {
		return nil, 0, err
	}
	for _, rv := range reviews {
		at := rv.GetSubmittedAt().Time
		switch strings.ToUpper(rv.GetState()) {
		case "CHANGES_REQUESTED", "COMMENTED": // approvals ask for nothing; pending and dismissed reviews are not the reviewer's word
		default:
			continue
		}
		if at.Before(since) || markers.IsBotLogin(rv.GetUser()) {
			continue
		}
		if text, flags, ok := reviseText(rv.GetBody(), slug, false); ok {
			items = append(items, feedbackItem{at: at, author: rv.GetUser().GetLogin(), kind: "review", state: rv.GetState(), body: text, flags: flags,
				ref: hub.BodyRef{Kind: hub.BodyReview, Number: number, ID: rv.GetID()}, raw: rv.GetBody()})
		}
	}
	inline, err := gh.ReviewComments(ctx, number)
	if err != nil {
		return nil, 0, err
	}
	addressed := addressedInline(inline, login)
	for _, c := range inline {
		if addressed[c.GetID()] || markers.IsBotLogin(c.GetUser()) {
			continue
		}
		if text, flags, ok := reviseText(c.GetBody(), slug, false); ok {
			items = append(items, feedbackItem{at: c.GetCreatedAt().Time, author: c.GetUser().GetLogin(), kind: "inline",
				id: c.GetID(), path: c.GetPath(), line: c.GetLine(), hunk: c.GetDiffHunk(), body: text, flags: flags,
				ref: hub.BodyRef{Kind: hub.BodyReviewComment, Number: number, ID: c.GetID()}, raw: c.GetBody()})
		}
	}
	var out feedback
	for _, it := range items {
		ok, err := bs.c.canWrite(ctx, gh, it.author)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			out = append(out, it)
		}
	}
	slices.SortStableFunc(out, func(a, b feedbackItem) int { return a.at.Compare(b.at) })
	return out, upto, nil
}

// reviseText is what a piece of text asks the agent to do: the text of a
// /revise command or, in the conversation (commandOnly), a /revise or a
// mention of the App and nothing else; elsewhere (review bodies, inline
// comments) any text that is not another command.
func reviseText(body, slug string, commandOnly bool) (string, sandboxcfg.Flags, bool) {
	cmd, perr := commands.ParseCommand(body)
	switch {
	case perr != nil:
		return "", sandboxcfg.Flags{}, false
	case cmd != nil:
		return cmd.Text, cmd.Flags, cmd.Name == "revise" && strings.TrimSpace(cmd.Text) != ""
	case commandOnly:
		text, found := ParseMention(body, slug)
		if !found || text == "" {
			return "", sandboxcfg.Flags{}, false
		}
		if strings.HasPrefix(text, "/") {
			return reviseText(text, slug, true)
		}
		return text, sandboxcfg.Flags{}, true
	}
	body = strings.TrimSpace(body)
	return body, sandboxcfg.Flags{}, body != ""
}

// addressedInline are the inline comments the bot replied on: its replies
// carry a marker naming them.
func addressedInline(comments []*github.PullRequestComment, login string) map[int64]bool {
	done := map[int64]bool{}
	for _, c := range comments {
		if !markers.IsOwnBot(c.GetUser(), login) {
			continue
		}
		if m, ok := markers.Parse(c.GetBody()); ok && m.Kind == markers.KindInlineReply {
			for _, id := range m.Inline {
				done[id] = true
			}
		}
	}
	return done
}

// inlineContext is where an inline comment sits, for the agent.
func inlineContext(path string, line int, hunk string) string {
	if path == "" {
		return ""
	}
	s := fmt.Sprintf("On `%s`", path)
	if line > 0 {
		s += fmt.Sprintf(" line %d", line)
	}
	s += ":\n"
	if hunk != "" {
		s += "```diff\n" + hunk + "\n```\n"
	}
	return s
}
