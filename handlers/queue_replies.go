package handlers

import (
	"cmp"
	"context"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// QueuedData is github/queued: the run waits for a slot under the
// server's caps.
type QueuedData struct {
	TaskID string
	Mode   dispatch.Mode
	// Place is the run's place among the waiting runs: 1 starts next.
	Place int
	// Ahead is how many wait before it (Place-1).
	Ahead int
	// Caps describe the caps that are set ("2 in all", "1 per repository").
	Caps   []string
	Marker string
}

// QueueAbortedData is github/queue_aborted: /abort removed a waiting run
// from the queue.
type QueueAbortedData struct {
	TaskID string
	By     string
	Marker string
}

// queuedRequestLost tells the issue of a queued run that cannot start
// because what the bot kept to start it is gone or unreadable, so that
// agent:queued does not stay on an issue with no entry, no run and no
// word: the failure comment (keyed on the run's task id, so a second bot
// does not post it again) and agent:failed, under the lock the queued run
// still holds. Nothing is said when the run did start (a marker of it is
// on the issue) or the repository is gone.
func (a agentRun) queuedRequestLost(ctx context.Context, e dispatch.QueueEntry, cause error) {
	log := zerolog.Ctx(ctx)
	gh, err := a.c.Hub.Repo(e.InstallationID, e.Repo)
	if err != nil {
		log.Warn().Err(err).Msg("cannot tell the issue its queued run was lost: no installation client")
		return
	}
	repo, err := gh.Repository(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("cannot tell the issue its queued run was lost: repository not readable")
		return
	}
	marked, err := a.c.botMarked(ctx, gh, e.Number)
	if err != nil {
		log.Warn().Err(err).Msg("cannot tell the issue its queued run was lost")
		return
	}
	req := startRequest{InstallationID: e.InstallationID, Repo: repo, Number: e.Number, Issue: e.Number, Mode: dispatch.ModePlan, Trigger: e.TaskID}
	for _, m := range marked {
		switch {
		case m.Marker.TaskID != e.TaskID:
		case m.Marker.Kind == markers.KindQueued:
			req.Mode, req.Issue = m.Marker.Mode, cmp.Or(m.Marker.Issue, e.Number)
		default:
			return // it started (or was told already)
		}
	}
	if err := a.failedToStart(ctx, gh, req, cause, true); err != nil {
		log.Warn().Err(err).Msg("tell the issue its queued run was lost")
	}
}
