package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// aborter stops the run a person asks to stop (/abort, /dequeue).
type aborter struct {
	c    *core
	runs *follow.Runs
	sets *attemptSets
}

// abort stops holder, the run holding the issue: a run that waits in the
// queue leaves it and releases the issue; a running one is cancelled (the
// runner still pushes and writes its receipt, and the follower posts that
// it was aborted). A lock whose run is gone is released.
func (ab *aborter) abort(ctx context.Context, t thread, holder string) error {
	if holder == "" {
		return ab.c.reply(ctx, t.gh, t.number, "github/nothing_to_abort", TableReplyData{OnPR: t.isPR, Commands: commandsFor(t.isPR)})
	}
	key := dispatch.LockKey(t.repo.GetFullName(), t.number)
	if handled, err := ab.sets.abort(ctx, t, holder); handled || err != nil {
		return err
	}
	if handled, err := ab.abortQueued(ctx, t, key, holder); handled || err != nil {
		return err
	}
	ab.runs.MarkAborted(holder, t.sender)
	ab.c.react(ctx, t.gh, t.number, t.commentID, "+1")
	if err := ab.c.Backend.Cancel(ctx, holder); errors.Is(err, dispatch.ErrNotFound) {
		// The lock outlived its run (a bot stopped between taking the lock
		// and submitting): /abort is how a person clears it.
		if err := ab.c.Backend.Unlock(ctx, key, holder); err != nil {
			return fmt.Errorf("release stale lock of %s: %w", holder, err)
		}
		return ab.c.reply(ctx, t.gh, t.number, "github/stale_lock", StaleLockData{Holder: holder})
	} else if err != nil {
		return fmt.Errorf("cancel %s: %w", holder, err)
	}
	return ab.c.reply(ctx, t.gh, t.number, "github/abort_requested", AbortRequestedData{
		Marker: markers.Marker{Kind: markers.KindAbortRequested, TaskID: holder}.String(), TaskID: holder, By: t.sender,
	})
}

// abortQueued removes a run that still waits from the queue: /abort on it
// releases the issue and says so, the label and the reply written before
// the lock is released. handled=false when holder is not waiting (it
// runs, or is being started), for the ordinary abort.
func (ab *aborter) abortQueued(ctx context.Context, t thread, key, holder string) (handled bool, err error) {
	removed, err := dispatch.DequeueWaiting(ctx, ab.c.Backend, holder)
	if err != nil || !removed {
		return false, err
	}
	if err := ab.c.Backend.DropQueued(ctx, holder); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("drop aborted queued run")
	}
	ab.c.react(ctx, t.gh, t.number, t.commentID, "+1")
	err = errors.Join(ab.c.setState(ctx, t.gh, t.number, lifecycle.Aborted),
		ab.c.reply(ctx, t.gh, t.number, "github/queue_aborted", QueueAbortedData{
			TaskID: holder, By: t.sender, Marker: markers.Marker{Kind: markers.KindAborted, TaskID: holder}.String(),
		}))
	if uerr := ab.c.Backend.Unlock(ctx, key, holder); uerr != nil {
		return true, errors.Join(err, fmt.Errorf("release the lock of queued run %s: %w", holder, uerr))
	}
	return true, err
}
