package handlers

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// replyState answers with the github/<name> template the table chose,
// filled with everything a table reply may say (TableReplyData).
func (sr *stateReplies) replyState(ctx context.Context, t thread, ev event, sc *scene, name string) error {
	return sr.c.reply(ctx, t.gh, t.number, "github/"+name, sr.tableData(t, ev, sc))
}

// tableData is what the bot saw, for any reply the table chooses: all of
// it, whichever reply it is, so a reply added to the table needs no code.
func (sr *stateReplies) tableData(t thread, ev event, sc *scene) TableReplyData {
	d := TableReplyData{
		Command: ev.command(), OnPR: t.isPR, Commands: commandsFor(t.isPR), State: sc.state.Label(),
		TaskID: sc.holder, Round: 1, Mode: sc.last.Mode,
		MaxRounds: sr.c.MaxPlanRounds, TriggerLabel: sr.c.TriggerLabel, Slug: sr.c.slug(),
	}
	if ack, ok := sc.holderAck(); ok {
		d.TaskID, d.Round = ack.Marker.TaskID, max(ack.Marker.Round, 1)
	}
	if sc.state == lifecycle.NotOurs {
		d.NotAgentPR, d.Commands = true, nil
	}
	return d
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
func (a agentRun) replyBusyNow(ctx context.Context, gh hub.GitHub, req startRequest, holder string, mode dispatch.Mode) error {
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
func commandsFor(onPR bool) []string { return commands.Grammar(lifecycle.Commands).Help(onPR) }
