package handlers

import (
	"context"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// actedOn reports whether the bot already acted on taskID on issue or PR
// number: one of its own comments carries a marker of that task (the
// acknowledgement is posted right after submission; plan, result, failure
// and abort comments follow). Task ids are derived from the triggering
// event, so a redelivered webhook maps to the same task; the backend
// forgets a run once it is cleaned up and the in-memory delivery cache is
// gone after a restart, but the marker on GitHub stays. A crash between
// submission and acknowledgement is covered by the backend's create-only
// submission, which still knows the run then.
//
// When the queue starts a run (fromQueue), the reply that it was queued
// does not count: only what followed its start does.
//
// The marked comments are those the caller read already (a /preview's
// scene), else they are read here.
func (s *starter) actedOn(ctx context.Context, gh hub.GitHub, l launch) (bool, error) {
	marked, err := l.marked, error(nil)
	if !l.haveMarked {
		if marked, err = s.c.botMarked(ctx, gh, l.req.Number); err != nil {
			return false, err
		}
	}
	fromQueue := l.req.queuedAs != ""
	for _, m := range marked {
		if m.Marker.TaskID == l.taskID && !(fromQueue && m.Marker.Kind == markers.KindQueued) {
			return true, nil
		}
	}
	return false, nil
}
