package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// abort stops holder, the run holding the issue: a run that waits in the
// queue leaves it and releases the issue; a running one is cancelled (the
// runner still pushes and writes its receipt, and the follower posts that
// it was aborted). A lock whose run is gone is released.
func (b *Base) abort(ctx context.Context, t thread, holder string) error {
	if holder == "" {
		return b.reply(ctx, t.gh, t.number, "github/nothing_to_abort", NothingToAbortData{})
	}
	key := dispatch.LockKey(t.repo.GetFullName(), t.number)
	if handled, err := b.abortQueued(ctx, t, key, holder); handled || err != nil {
		return err
	}
	b.Runs.MarkAborted(holder, t.sender)
	b.react(ctx, t.gh, t.number, t.commentID, "+1")
	if err := b.Backend.Cancel(ctx, holder); errors.Is(err, dispatch.ErrNotFound) {
		// The lock outlived its run (a bot stopped between taking the lock
		// and submitting): /abort is how a person clears it.
		if err := b.Backend.Unlock(ctx, key, holder); err != nil {
			return fmt.Errorf("release stale lock of %s: %w", holder, err)
		}
		return b.reply(ctx, t.gh, t.number, "github/stale_lock", StaleLockData{Holder: holder})
	} else if err != nil {
		return fmt.Errorf("cancel %s: %w", holder, err)
	}
	return b.reply(ctx, t.gh, t.number, "github/abort_requested", AbortRequestedData{
		Marker: Marker{Kind: KindAbortRequested, TaskID: holder}.String(), TaskID: holder, By: t.sender,
	})
}

// abortQueued removes a run that still waits from the queue: /abort on it
// releases the issue and says so, the label and the reply written before
// the lock is released. handled=false when holder is not waiting (it
// runs, or is being started), for the ordinary abort.
func (b *Base) abortQueued(ctx context.Context, t thread, key, holder string) (handled bool, err error) {
	removed, err := dispatch.DequeueWaiting(ctx, b.Backend, holder)
	if err != nil || !removed {
		return false, err
	}
	if err := b.Backend.DropQueued(ctx, holder); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("drop aborted queued run")
	}
	b.react(ctx, t.gh, t.number, t.commentID, "+1")
	err = errors.Join(b.setState(ctx, t.gh, t.number, lifecycle.Aborted),
		b.reply(ctx, t.gh, t.number, "github/queue_aborted", QueueAbortedData{
			TaskID: holder, By: t.sender, Marker: Marker{Kind: KindAborted, TaskID: holder}.String(),
		}))
	if uerr := b.Backend.Unlock(ctx, key, holder); uerr != nil {
		return true, errors.Join(err, fmt.Errorf("release the lock of queued run %s: %w", holder, uerr))
	}
	return true, err
}

// agentPR reads a PR and tells whether this App opened it (isAgentPR), and
// for which issue.
func (b *Base) agentPR(ctx context.Context, gh GitHub, number int) (pr *github.PullRequest, issue int, ours bool, err error) {
	login, err := b.LoadIdentity(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	if pr, err = gh.PullRequest(ctx, number); err != nil {
		return nil, 0, false, err
	}
	issue, ours = isAgentPR(pr, login)
	return pr, issue, ours, nil
}
