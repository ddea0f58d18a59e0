package handlers

import (
	"context"
	"errors"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// event is what a handler parsed from a webhook: which event of the table
// it is and what it carries.
type event struct {
	kind lifecycle.Event
	// cmd is the command of a command event (its flags and text).
	cmd *commands.Command
	// problem is what is wrong with a comment that is almost a command
	// (Typo).
	problem string
	// text is a mention's words to the App.
	text string
	// trigger is what the task id derives from: the delivery or comment
	// id ("review-N", "inline-N", "push-SHA").
	trigger string
	// tried says, in a refusal, what a person without write access tried
	// ("use `/approve`").
	tried string
	// ci is what failing checks carry (ChecksFailed, ci.go).
	ci *ciEvent
	// thread is the review thread a command in an inline comment was
	// written in (its first comment's id), 0 elsewhere.
	thread int64
}

// on is the one way from an event to what the bot does: it checks that
// the person may ask, observes the issue or pull request, asks the table,
// and performs what it says. It returns the case it performed.
func (b *Base) on(ctx context.Context, t thread, ev event) (lifecycle.Case, error) {
	log := zerolog.Ctx(ctx)
	if ok, err := b.gate.mayAsk(ctx, t, ev); err != nil || !ok {
		return lifecycle.Case{Do: lifecycle.Nothing}, err
	}
	sc, err := b.observe(ctx, t)
	if err != nil {
		return lifecycle.Case{}, err
	}
	sc.facts.NoText = ev.text == ""
	sc.facts.AsksReview = ev.kind == lifecycle.Mention && asksReview(ev.text)
	if ev.ci != nil {
		b.ci.facts(ctx, t, &sc, ev.ci)
	}
	c, ok := lifecycle.Decide(sc.place, sc.state, ev.kind, sc.facts)
	log.Info().Str("event", string(ev.kind)).Str("state", string(sc.state)).Str("do", string(c.Do)).Str("sender", t.sender).Msg("event")
	if !ok || c.Do == lifecycle.Nothing {
		return c, nil
	}
	if triggerActed(sc.marked, t.repo.GetFullName(), t.number, ev.trigger) {
		log.Info().Str("trigger", ev.trigger).Msg("already acted on (its marker is on GitHub): a redelivered event, nothing to do")
		return lifecycle.Case{Do: lifecycle.Nothing}, nil
	}
	return c, b.perform(ctx, t, ev, &sc, c)
}

// perform does what the table's case says.
func (b *Base) perform(ctx context.Context, t thread, ev event, sc *scene, c lifecycle.Case) error {
	if name, ok := c.Do.ReplyName(); ok {
		return b.replies.replyState(ctx, t, ev, sc, name)
	}
	switch c.Do {
	case lifecycle.Busy:
		return b.c.replyBusy(ctx, t, sc, ev.command(), askedMode(ev, sc))
	case lifecycle.Help:
		return b.c.reply(ctx, t.gh, t.number, "github/command_error", CommandErrorData{
			Error: ev.problem, Commands: commandsFor(t.isPR), OnPR: t.isPR, State: sc.state.Label(),
		})
	case lifecycle.ShowStatus:
		return b.replies.status(ctx, t, sc)
	case lifecycle.StartRoutine:
		return b.Routines.runNow(ctx, t, ev.cmd.Text)
	case lifecycle.Cancel, lifecycle.Dequeue:
		return b.aborts.abort(ctx, t, sc.holder)
	case lifecycle.Collect:
		return b.batches.add(ctx, t.gh, requestFor(t, ev, dispatch.ModeRevise))
	case lifecycle.UpdateBranch:
		return b.rebase(ctx, t, sc, ev.trigger, ev.kind == lifecycle.Rebase)
	case lifecycle.StartPreview:
		return b.preview(ctx, t, sc)
	case lifecycle.PickAttempt:
		return b.pick(ctx, t, ev, sc)
	case lifecycle.FixCI:
		return b.ci.fix(ctx, t, ev, sc)
	case lifecycle.WaitForRun:
		return b.batches.waitCI(ctx, t, ev)
	case lifecycle.ReportBaseFails, lifecycle.GiveUpCI:
		return b.ci.reply(ctx, t, ev, sc, c.Do)
	}
	req, ok := b.runFor(ctx, t, ev, sc, c.Do)
	if !ok {
		return nil
	}
	return b.starts.start(ctx, t.gh, req)
}

// command is the name of the command the event is ("" for a label, a
// mention or a review).
func (ev event) command() string {
	if ev.cmd != nil {
		return ev.cmd.Name
	}
	return ""
}

// requestFor is a start request for what t and ev ask, before the table's
// action says which run.
func requestFor(t thread, ev event, mode dispatch.Mode) startRequest {
	req := startRequest{
		InstallationID: t.installation, Repo: t.repo, Number: t.number, IsPR: t.isPR, Mode: mode,
		Trigger: ev.trigger, DeliveryID: t.deliveryID, Sender: t.sender, CommentID: t.commentID, Command: ev.command(),
	}
	if ev.cmd != nil {
		req.Flags = ev.cmd.Flags
	}
	return req
}

// runFor is the run a starting action asks for: its mode and what it
// carries over from the issue (the plan, the round, the branch).
func (b *Base) runFor(ctx context.Context, t thread, ev event, sc *scene, do lifecycle.Action) (startRequest, bool) {
	req := requestFor(t, ev, dispatch.ModePlan)
	if sc.pr != nil {
		req.Issue, req.Branch, req.BaseBranch = sc.issue, sc.pr.GetHead().GetRef(), sc.pr.GetBase().GetRef()
	}
	plan := func() {
		if sc.hasPlan {
			req.Plan, req.PlanTask, req.PlanSHA = markers.PlanText(sc.plan.Comment.GetBody()), sc.plan.Marker.TaskID, sc.plan.Marker.PlanSHA
			req.PlanFiles = sc.plan.Marker.Files
		}
	}
	if (ev.kind == lifecycle.Label || ev.kind == lifecycle.Mention) && !t.isPR {
		// A writer's label or mention vouches for the issue's text as the
		// event saw it (vouch.go).
		req.Vouch = vouchOf(t.sender, t.issue)
	}
	switch do {
	case lifecycle.StartPlan:
		req.Round = 1
		if ev.kind == lifecycle.Mention {
			b.labelForMention(ctx, t)
			if ev.text != "" {
				req.Instructions = &dispatch.Comment{Author: t.sender, Body: ev.text}
			}
		}
	case lifecycle.Replan:
		req.Round, req.Feedback = sc.plan.Marker.Round+1, ev.feedback()
		req.Command = "revise"
		if sc.hasPlan {
			req.Plan = markers.PlanText(sc.plan.Comment.GetBody())
		}
	case lifecycle.Execute:
		req.Mode = dispatch.ModeExecute
		plan()
	case lifecycle.RetryRun, lifecycle.ContinueRun:
		b.retryRun(&req, sc, do == lifecycle.ContinueRun, plan)
	default:
		mode, ok := do.StartsMode()
		if !ok {
			zerolog.Ctx(ctx).Error().Str("do", string(do)).Msg("the table asked for an action the handlers do not know")
			return req, false
		}
		req.Mode = mode
		switch mode {
		case dispatch.ModeReview:
			return req, reviewRequest(ctx, t, ev, &req)
		case dispatch.ModeFix:
			return req, fixRequest(ctx, b.c, t, ev, &req)
		}
		plan()
	}
	return req, true
}

// retryRun makes req the last run again (/retry) or its continuation
// (/continue). On a pull request a retry with no run before is a revise,
// and a continue run (or the retry of an execute) resumes the PR's branch.
func (b *Base) retryRun(req *startRequest, sc *scene, cont bool, plan func()) {
	last := sc.last
	if sc.place == lifecycle.OnPR {
		req.Mode = dispatch.ModeRevise
		if sc.hasLast {
			req.Mode = last.Mode
		}
		if cont || req.Mode == dispatch.ModeExecute {
			req.Mode = dispatch.ModeContinue
		}
		return
	}
	req.Mode, req.Round = last.Mode, last.Round
	plan()
	// /continue resumes the last run's branch; /retry of a continue run
	// does the same, any other /retry starts the step afresh.
	if cont || last.Mode == dispatch.ModeContinue {
		req.Mode, req.Branch = dispatch.ModeContinue, last.Branch
	}
}

// feedback is the text a re-plan takes: the /revise text, or the words of
// a mention on a plan.
func (ev event) feedback() string {
	if ev.cmd != nil {
		return ev.cmd.Text
	}
	return ev.text
}

// askedMode is the run the event asked for, for a busy reply.
func askedMode(ev event, sc *scene) dispatch.Mode {
	switch ev.kind {
	case lifecycle.Approve:
		return dispatch.ModeExecute
	case lifecycle.Retry, lifecycle.Continue:
		if ev.kind == lifecycle.Continue || sc.last.Mode == dispatch.ModeContinue {
			return dispatch.ModeContinue
		}
		if sc.hasLast {
			return sc.last.Mode
		}
		return dispatch.ModeRevise
	case lifecycle.Push, lifecycle.Rebase:
		return dispatch.ModeRebase
	}
	if mode, ok := lifecycle.StartedBy(sc.place, ev.kind); ok {
		return mode
	}
	return dispatch.ModePlan
}

// labelForMention shows that the issue is the agent's, as if a writer had
// added the trigger label; the labeled event it causes is the App's own
// and ignored.
func (b *Base) labelForMention(ctx context.Context, t thread) {
	if err := t.gh.AddLabels(ctx, t.number, b.TriggerLabel); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("label", b.TriggerLabel).Msg("add the trigger label")
	}
}

// commentTrigger is the task-id trigger of a command or mention comment.
func commentTrigger(id int64) string { return strconv.FormatInt(id, 10) }

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
