package handlers

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// replyState answers with the github/<name> template the table chose,
// filled from what the bot saw.
func (sr *stateReplies) replyState(ctx context.Context, t thread, ev event, sc *scene, name string) error {
	var data any
	switch name {
	case "no_plan":
		data = NoPlanData{TriggerLabel: sr.c.TriggerLabel}
	case "plan_in_progress":
		d := PlanInProgressData{Command: ev.command(), TaskID: sc.holder, Round: 1}
		if ack, ok := sc.holderAck(); ok {
			d.TaskID, d.Round = ack.Marker.TaskID, max(ack.Marker.Round, 1)
		}
		data = d
	case "max_rounds":
		data = MaxRoundsData{MaxRounds: sr.c.MaxPlanRounds}
	case "no_earlier_run":
		data = NoEarlierRunData{Command: ev.command()}
	case "nothing_to_continue":
		data = NothingToContinueData{Mode: sc.last.Mode}
	case "nothing_to_abort":
		data = NothingToAbortData{}
	case "wrong_place":
		d := WrongPlaceData{Command: ev.command(), OnPR: t.isPR, Commands: commandsFor(t.isPR)}
		if sc.state == lifecycle.NotOurs {
			d.NotAgentPR, d.Commands = true, nil
		}
		data = d
	case "mention_other_pr":
		data = MentionOtherPRData{Slug: sr.c.slug(), TriggerLabel: sr.c.TriggerLabel}
	default:
		return fmt.Errorf("the table chose the reply %q, which has no data here", name)
	}
	return sr.c.reply(ctx, t.gh, t.number, "github/"+name, data)
}

// replyBusy tells the person that the run holding the issue still runs,
// naming what it is when the bot's own acknowledgement says so; mode is
// the run they asked for.
func (c *core) replyBusy(ctx context.Context, t thread, sc *scene, command string, mode dispatch.Mode) error {
	data := BusyData{Holder: sc.holder, Mode: mode, Command: command}
	if ack, ok := sc.holderAck(); ok {
		data.HolderMode = ack.Marker.Mode
	}
	return c.reply(ctx, t.gh, t.number, "github/busy", data)
}

// replyBusyNow is replyBusy for a start that found the lock taken: the
// issue is read again for the holder's acknowledgement.
func (a agentRun) replyBusyNow(ctx context.Context, gh GitHub, req startRequest, holder string, mode dispatch.Mode) error {
	sc := &scene{holder: holder}
	if marked, err := a.c.botMarked(ctx, gh, req.Number); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the running task's acknowledgement")
	} else {
		sc.marked = marked
	}
	return a.c.replyBusy(ctx, thread{gh: gh, number: req.Number}, sc, req.Command, mode)
}

// commandsFor lists the commands that apply on an issue or on an agent PR,
// with their help, for replies.
func commandsFor(onPR bool) []string { return grammar(lifecycle.Commands).help(onPR) }
