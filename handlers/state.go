package handlers

import (
	"context"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// planInProgress returns the acknowledgement of the plan run that is still
// writing this plan: the newest of the bot's own markers is that
// acknowledgement (progress notes and abort requests aside), so no plan,
// failure, abort or result has followed it yet.
func planInProgress(marked []markedComment) (Marker, bool) {
	for i := len(marked) - 1; i >= 0; i-- {
		switch m := marked[i].Marker; m.Kind {
		case KindProgress, KindAbortRequested:
			continue
		case KindAck:
			return m, m.Mode == dispatch.ModePlan
		default:
			return Marker{}, false
		}
	}
	return Marker{}, false
}

// replyBusy tells the person that holder still runs here, naming what it
// is when the bot's own acknowledgement says so.
func (b *Base) replyBusy(ctx context.Context, client *github.Client, req startRequest, holder string, mode dispatch.Mode) error {
	data := BusyData{Holder: holder, Mode: mode, Command: req.Command}
	if marked, err := b.botMarked(ctx, client, req.owner(), req.name(), req.Number); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the running task's acknowledgement")
	} else if ack, ok := lastMarked(marked, KindAck, holder); ok {
		data.HolderMode = ack.Marker.Mode
	}
	return b.reply(ctx, client, req.owner(), req.name(), req.Number, "github/busy", data)
}

// commandsFor lists the commands that apply on an issue or on an agent PR,
// with their help, for replies.
func commandsFor(onPR bool) []string {
	var out []string
	for _, n := range CommandNames() {
		if commands[n].onPR == onPR || commands[n].onBoth {
			out = append(out, "`/"+n+"` — "+commands[n].help)
		}
	}
	return out
}
