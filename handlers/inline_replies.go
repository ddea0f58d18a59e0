package handlers

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// InlineReplyData is github/inline_reply: the bot's reply in a review
// thread whose comments a revise run addressed.
type InlineReplyData struct {
	Marker string
	TaskID string
	// Commit is the head the run pushed ("" when it changed nothing), and
	// CommitURL its page.
	Commit, CommitURL string
	// Comments is how many of the thread's comments the reply answers.
	Comments int
}

var commitSHA = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// replyInline answers, in their review threads, the inline comments a
// completed revise run was asked to address (ack.Inline), naming the
// commit it pushed. One reply per thread (GitHub takes replies only on a
// thread's first comment); a thread the bot already answered for these
// comments (a retry, a restart) gets none.
func (rp *resultPoster) replyInline(ctx context.Context, rc *runContext, ack markers.Marker, res *dispatch.Result) error {
	if len(ack.Inline) == 0 || res == nil || res.Status != dispatch.StatusCompleted {
		return nil
	}
	login, err := rp.c.LoadIdentity(ctx)
	if err != nil {
		return err
	}
	comments, err := rc.gh.ReviewComments(ctx, rc.meta.Number)
	if err != nil {
		return err
	}
	done := addressedInline(comments, login)
	root := map[int64]int64{}
	for _, c := range comments {
		root[c.GetID()] = c.GetID()
		if c.GetInReplyTo() != 0 {
			root[c.GetID()] = c.GetInReplyTo()
		}
	}
	threads := map[int64][]int64{}
	var order []int64
	for _, id := range ack.Inline {
		top, ok := root[id]
		if !ok || done[id] {
			continue // deleted since, or answered before a restart
		}
		if _, seen := threads[top]; !seen {
			order = append(order, top)
		}
		threads[top] = append(threads[top], id)
	}
	data := InlineReplyData{TaskID: rc.meta.TaskID}
	// The sandbox's receipt is untrusted: only a commit id goes in a link.
	if sha := strings.ToLower(res.HeadSHA); len(res.Commits) > 0 && commitSHA.MatchString(sha) {
		data.Commit = sha
		data.CommitURL = fmt.Sprintf("%s/%s/commit/%s", strings.TrimSuffix(rp.c.WebURL, "/"), rc.meta.Repo, sha)
	}
	slices.Sort(order)
	for _, top := range order {
		ids := threads[top]
		data.Comments = len(ids)
		data.Marker = markers.Marker{Kind: markers.KindInlineReply, TaskID: rc.meta.TaskID, Inline: ids}.String()
		body, err := rp.c.Templates.Render("github/inline_reply", data)
		if err != nil {
			return err
		}
		if err := rc.gh.ReplyToReviewComment(ctx, rc.meta.Number, top, strings.TrimSpace(body)); err != nil {
			return err
		}
		zerolog.Ctx(ctx).Info().Int64("comment_id", top).Ints64("addressed", ids).Msg("replied on addressed inline comments")
	}
	return nil
}
