package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
	"github.com/valyala/fastjson"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// IssueComment runs the comment commands (/approve, /revise, /abort,
// /retry, /continue, /rebase, /plan, /status) and @mentions of the App
// (mention.go) on issues and agent PRs. Edited and deleted comments do
// nothing: only "created" counts.
type IssueComment struct{ *Base }

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
	if string(head.GetStringBytes("action")) != "created" || h.isIgnoredSender(sender) || !h.mayAddress(head.GetStringBytes("comment", "body")) {
		return nil
	}
	var event github.IssueCommentEvent
	if err := json.Unmarshal(payload, &event); err != nil {
		return fmt.Errorf("parse issue_comment event: %w", err)
	}
	repo, issue, comment := event.GetRepo(), event.GetIssue(), event.GetComment()
	installationID := githubapp.GetInstallationIDFromEvent(&event)
	ctx, log := githubapp.PrepareRepoContext(ctx, installationID, repo)
	log = log.With().Int("issue", issue.GetNumber()).Int64("comment_id", comment.GetID()).Logger()
	ctx = log.WithContext(ctx)
	cc := commandContext{
		installationID: installationID, repo: repo, number: issue.GetNumber(), isPR: issue.IsPullRequest(),
		labels: issue.Labels, sender: event.GetSender().GetLogin(), commentID: comment.GetID(), deliveryID: deliveryID,
	}
	cmd, perr := ParseCommand(comment.GetBody())
	if cmd == nil && perr == nil {
		return h.mention(ctx, cc, comment.GetBody())
	}
	client, err := h.NewInstallationClient(installationID)
	if err != nil {
		return err
	}
	return h.command(ctx, client, cc, cmd, perr)
}

// commandContext is where a command was typed.
type commandContext struct {
	installationID int64
	repo           *github.Repository
	number         int
	isPR           bool
	labels         []*github.Label
	sender         string
	commentID      int64
	deliveryID     string
}

func (c commandContext) owner() string { return c.repo.GetOwner().GetLogin() }
func (c commandContext) name() string  { return c.repo.GetName() }

// command checks the sender and runs one parsed command.
func (b *Base) command(ctx context.Context, client *github.Client, cc commandContext, cmd *Command, perr error) error {
	log := zerolog.Ctx(ctx)
	owner, name := cc.owner(), cc.name()
	if cmd != nil && cmd.Name == "status" {
		return b.status(ctx, client, cc) // any reader may ask
	}
	ok, err := b.canWrite(ctx, client, owner, name, cc.sender)
	if err != nil {
		return err
	}
	if !ok {
		what := "use the bot's commands"
		if cmd != nil {
			what = "use `/" + cmd.Name + "`"
		}
		log.Info().Str("sender", cc.sender).Msg("refusing command: sender cannot write to the repository")
		return b.refuse(ctx, client, cc.repo, cc.number, cc.sender, what)
	}
	var cerr *CommandError
	if errors.As(perr, &cerr) {
		return b.reply(ctx, client, owner, name, cc.number, "github/command_error", CommandErrorData{
			Error: cerr.Msg, Commands: commandsFor(cc.isPR), OnPR: cc.isPR, State: stateOf(cc.labels),
		})
	}
	log.Info().Str("command", cmd.Name).Str("sender", cc.sender).Msg("command")
	req := startRequest{
		InstallationID: cc.installationID, Repo: cc.repo, Number: cc.number, IsPR: cc.isPR,
		Trigger: strconv.FormatInt(cc.commentID, 10), DeliveryID: cc.deliveryID, Sender: cc.sender,
		Flags: cmd.Flags, CommentID: cc.commentID, Command: cmd.Name,
	}
	if cc.isPR {
		return b.prCommand(ctx, client, cc, cmd, req)
	}
	marked, err := b.botMarked(ctx, client, owner, name, cc.number)
	if err != nil {
		return err
	}
	plan, hasPlan := lastMarked(marked, KindPlan, "")
	reply := func(tmpl string, data any) error { return b.reply(ctx, client, owner, name, cc.number, tmpl, data) }
	switch cmd.Name {
	case "plan":
		req.Mode, req.Round = dispatch.ModePlan, 1
		return b.start(ctx, client, req)
	case "approve", "revise":
		// While a plan is being written there is nothing (new) to approve
		// or revise yet; the busy reply would not say why.
		if ack, writing := planInProgress(marked); writing {
			return reply("github/plan_in_progress", PlanInProgressData{Command: cmd.Name, TaskID: ack.TaskID, Round: max(ack.Round, 1)})
		}
		if cmd.Name == "approve" {
			if !hasPlan {
				return reply("github/no_plan", NoPlanData{TriggerLabel: b.TriggerLabel})
			}
			req.Mode, req.Plan, req.PlanTask, req.PlanSHA = dispatch.ModeExecute, extractPlan(plan.Comment.GetBody()), plan.Marker.TaskID, plan.Marker.PlanSHA
			return b.start(ctx, client, req)
		}
		round := plan.Marker.Round + 1
		if round > b.MaxPlanRounds {
			return reply("github/max_rounds", MaxRoundsData{MaxRounds: b.MaxPlanRounds})
		}
		req.Mode, req.Round, req.Feedback = dispatch.ModePlan, round, cmd.Text
		if hasPlan {
			req.Plan = extractPlan(plan.Comment.GetBody())
		}
		return b.start(ctx, client, req)
	case "abort":
		return b.abort(ctx, client, cc)
	case "retry", "continue":
		last, ok := lastOutcome(marked)
		if !ok {
			return reply("github/no_earlier_run", NoEarlierRunData{Command: cmd.Name})
		}
		req.Mode, req.Round = last.Mode, last.Round
		if hasPlan {
			req.Plan, req.PlanTask, req.PlanSHA = extractPlan(plan.Comment.GetBody()), plan.Marker.TaskID, plan.Marker.PlanSHA
		}
		// /continue resumes the last run's branch; /retry of a continue
		// run does the same, any other /retry starts the step afresh.
		if cmd.Name == "continue" || last.Mode == dispatch.ModeContinue {
			if last.Branch == "" || !last.Mode.WritesCode() {
				return reply("github/nothing_to_continue", NothingToContinueData{Mode: last.Mode})
			}
			req.Mode, req.Branch = dispatch.ModeContinue, last.Branch
		}
		return b.start(ctx, client, req)
	default: // /rebase: a PR command
		return reply("github/wrong_place", WrongPlaceData{Command: cmd.Name, Commands: commandsFor(false)})
	}
}

// lastOutcome is the marker of the newest run that ended (or was started)
// on this issue, for /retry and /continue.
func lastOutcome(marked []markedComment) (Marker, bool) {
	for i := len(marked) - 1; i >= 0; i-- {
		switch m := marked[i].Marker; m.Kind {
		case KindFailure, KindAborted, KindResult, KindAck, KindPlan:
			return m, true
		}
	}
	return Marker{}, false
}

// prCommand runs a command typed on a pull request.
func (b *Base) prCommand(ctx context.Context, client *github.Client, cc commandContext, cmd *Command, req startRequest) error {
	owner, name := cc.owner(), cc.name()
	pr, issue, ok, err := b.agentPR(ctx, client, owner, name, cc.number)
	if err != nil {
		return err
	}
	if !ok {
		return b.reply(ctx, client, owner, name, cc.number, "github/wrong_place", WrongPlaceData{Command: cmd.Name, OnPR: true, NotAgentPR: true})
	}
	req.Issue, req.Branch, req.BaseBranch = issue, pr.GetHead().GetRef(), pr.GetBase().GetRef()
	switch cmd.Name {
	case "revise":
		// The PR's review batch (batch.go) starts the run and reads this
		// comment back from GitHub with the rest of the feedback.
		req.Mode = dispatch.ModeRevise
		return b.batches.add(ctx, client, req)
	case "rebase":
		return b.rebase(ctx, client, cc.installationID, cc.repo, pr, req.Trigger, cc.deliveryID, true)
	case "abort":
		return b.abort(ctx, client, cc)
	case "retry", "continue":
		marked, err := b.botMarked(ctx, client, owner, name, cc.number)
		if err != nil {
			return err
		}
		last, ok := lastOutcome(marked)
		if !ok {
			last.Mode = dispatch.ModeRevise
		}
		req.Mode = last.Mode
		if cmd.Name == "continue" || req.Mode == dispatch.ModeExecute {
			req.Mode = dispatch.ModeContinue
		}
		return b.start(ctx, client, req)
	default:
		return b.reply(ctx, client, owner, name, cc.number, "github/wrong_place", WrongPlaceData{Command: cmd.Name, OnPR: true, Commands: commandsFor(true)})
	}
}

// abort cancels the issue's active run. The runner still pushes and writes
// its receipt; the follower posts that it was aborted.
func (b *Base) abort(ctx context.Context, client *github.Client, cc commandContext) error {
	owner, name := cc.owner(), cc.name()
	key := dispatch.LockKey(cc.repo.GetFullName(), cc.number)
	holder, err := b.Backend.Holder(ctx, key)
	if err != nil {
		return fmt.Errorf("find the run to abort: %w", err)
	}
	if holder == "" {
		return b.reply(ctx, client, owner, name, cc.number, "github/nothing_to_abort", NothingToAbortData{})
	}
	if handled, err := b.abortQueued(ctx, client, cc, key, holder); handled || err != nil {
		return err
	}
	b.Runs.MarkAborted(holder, cc.sender)
	b.react(ctx, client, owner, name, cc.commentID, "+1")
	if err := b.Backend.Cancel(ctx, holder); errors.Is(err, dispatch.ErrNotFound) {
		// The lock outlived its run (a bot stopped between taking the lock
		// and submitting): /abort is how a person clears it.
		if err := b.Backend.Unlock(ctx, key, holder); err != nil {
			return fmt.Errorf("release stale lock of %s: %w", holder, err)
		}
		return b.reply(ctx, client, owner, name, cc.number, "github/stale_lock", StaleLockData{Holder: holder})
	} else if err != nil {
		return fmt.Errorf("cancel %s: %w", holder, err)
	}
	return b.reply(ctx, client, owner, name, cc.number, "github/abort_requested", AbortRequestedData{
		Marker: Marker{Kind: KindAbortRequested, TaskID: holder}.String(), TaskID: holder, By: cc.sender,
	})
}

// agentPR reads a PR and tells whether this App opened it (isAgentPR), and
// for which issue.
func (b *Base) agentPR(ctx context.Context, client *github.Client, owner, repo string, number int) (*github.PullRequest, int, bool, error) {
	login, err := b.LoadIdentity(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	pr, _, err := client.PullRequests.Get(ctx, owner, repo, number)
	if err != nil {
		return nil, 0, false, fmt.Errorf("read PR #%d: %w", number, err)
	}
	issue, ok := isAgentPR(pr, login)
	return pr, issue, ok, nil
}
