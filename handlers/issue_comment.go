package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/valyala/fastjson"

	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// IssueComment hands the table the comment commands (/approve, /revise,
// /abort, /retry, /continue, /rebase, /plan, /status) and @mentions of the
// App (mention.go) on issues and pull requests. Edited and deleted
// comments do nothing: only "created" counts.
type IssueComment struct{ b *Base }

var _ githubapp.EventHandler = &IssueComment{}

// Handles implements githubapp.EventHandler.
func (h *IssueComment) Handles() []string { return []string{"issue_comment"} }

// Handle implements githubapp.EventHandler.
func (h *IssueComment) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	// Most comments are conversation, not commands: decide that from three
	// fields before decoding the whole event, with fastjson, which reads a
	// 15 KB payload several times faster than encoding/json (under webhook
	// load the full decode was 44 % of the server's CPU).
	var p fastjson.Parser
	head, err := p.ParseBytes(payload)
	if err != nil {
		return fmt.Errorf("parse issue_comment event: %w", err)
	}
	sender := &github.User{Login: github.String(string(head.GetStringBytes("sender", "login"))), Type: github.String(string(head.GetStringBytes("sender", "type")))}
	if string(head.GetStringBytes("action")) != "created" || h.b.gate.isIgnoredSender(sender) || !h.b.mayAddress(head.GetStringBytes("comment", "body")) {
		return nil
	}
	var e github.IssueCommentEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse issue_comment event: %w", err)
	}
	repo, issue, comment := e.GetRepo(), e.GetIssue(), e.GetComment()
	installation := githubapp.GetInstallationIDFromEvent(&e)
	ctx, log := githubapp.PrepareRepoContext(ctx, installation, repo)
	ctx = log.With().Int("issue", issue.GetNumber()).Int64("comment_id", comment.GetID()).Logger().WithContext(ctx)
	t, err := h.b.thread(installation, repo, issue.GetNumber(), issue.IsPullRequest())
	if err != nil {
		return err
	}
	t.sender, t.commentID, t.deliveryID, t.issue = e.GetSender().GetLogin(), comment.GetID(), deliveryID, issue
	cmd, perr := commands.ParseCommand(comment.GetBody())
	if cmd == nil && perr == nil {
		return h.b.mention(ctx, t, comment.GetBody())
	}
	_, err = h.b.on(ctx, t, commandEvent(cmd, perr, commentTrigger(comment.GetID())))
	return err
}

// commandEvent is the table's event for a parsed command, or for a
// comment that is almost one.
func commandEvent(cmd *commands.Command, perr error, trigger string) event {
	var cerr *commands.CommandError
	if errors.As(perr, &cerr) || cmd == nil {
		ev := event{kind: lifecycle.Typo, trigger: trigger, tried: "use the bot's commands"}
		if cerr != nil {
			ev.problem = cerr.Msg
		}
		return ev
	}
	return event{kind: cmd.Event(), cmd: cmd, trigger: trigger, tried: "use `/" + cmd.Name + "`"}
}
