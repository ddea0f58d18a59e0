package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// dispatchTries is how often a transient submission error is tried.
const dispatchTries = 3

// failedToStart logs why a run did not start and tells the issue, unless
// the bot is stopping. locked says the caller holds the issue's lock; if
// not, it is taken for the label, and a run holding it keeps its label.
func (a agentRun) failedToStart(ctx context.Context, gh hub.GitHub, req startRequest, cause error, locked bool) error {
	if ctx.Err() != nil {
		return cause
	}
	zerolog.Ctx(ctx).Error().Err(cause).Str("mode", string(req.Mode)).Int("number", req.Number).Msg("run could not start; telling the issue")
	if err := a.reportStartFailure(ctx, gh, req, cause, locked); err != nil {
		return fmt.Errorf("%w (and reporting it failed: %v)", cause, err)
	}
	return nil
}

// reportStartFailure posts the failure comment once per trigger (a
// redelivered event finds its marker) and sets agent:failed.
func (a agentRun) reportStartFailure(ctx context.Context, gh hub.GitHub, req startRequest, cause error, locked bool) error {
	issue := cmp.Or(req.Issue, req.Number)
	// The task id the trigger maps to, as a key for the marker: the run
	// itself may have got another (a plan that is not required becomes
	// execute), but this one is stable for the same trigger.
	key := dispatch.NewTaskID(req.Repo.GetFullName(), req.Number, req.Mode, req.Trigger)
	marked, err := a.c.botMarked(ctx, gh, req.Number)
	if err != nil {
		return err
	}
	if _, ok := markers.Last(marked, markers.KindFailure, key); ok {
		zerolog.Ctx(ctx).Info().Str("task_id", key).Msg("start failure already reported")
		return nil
	}
	var labelErr error
	if !locked {
		lockKey := dispatch.LockKey(req.Repo.GetFullName(), req.Number)
		if _, err := a.c.Backend.Lock(ctx, lockKey, key); err == nil {
			defer a.c.unlock(ctx, lockKey, key)
			locked = true
		}
	}
	if locked {
		labelErr = a.c.setState(ctx, gh, req.Number, lifecycle.Failed)
	}
	what, todo := explainStartFailure(cause, a.c.DispatchDeadline)
	return errors.Join(labelErr, a.c.reply(ctx, gh, req.Number, "github/start_failed", StartFailedData{
		Mode: req.Mode, What: what, Todo: todo, TaskID: key, Delivery: req.DeliveryID,
		Marker: markers.Marker{Kind: markers.KindFailure, TaskID: key, Mode: req.Mode, Issue: issue, Branch: req.Branch, Round: req.Round}.String(),
	}))
}

// unlock releases the issue's lock held by taskID, even when the bot is
// stopping; a failure is logged (the lock then waits for /abort).
func (c *core) unlock(ctx context.Context, key, taskID string) {
	if err := c.Backend.Unlock(context.WithoutCancel(ctx), key, taskID); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("lock", key).Msg("release lock")
	}
}

// explainStartFailure says, for people on the issue, what failed and what
// to do. The error itself stays in the log: it can name internal hosts
// and paths, and issues may be public.
func explainStartFailure(err error, deadline time.Duration) (what, todo string) {
	msg := err.Error()
	const retry = "Then comment `/retry`."
	switch {
	case errors.Is(err, dispatch.ErrImageMissing):
		return "the sandbox image is not available to the bot's backend",
			"An operator of the bot must build or load the sandbox image (`deploy/sandbox/build`) or point `SANDBOX_IMAGE` at one. " + retry
	case errors.Is(err, dispatch.ErrIsolationRefused):
		return "the host refused the sandbox's isolation profile",
			"An operator must allow privileged containers (Nomad: the docker plugin's `allow_privileged`) or set `SANDBOX_ISOLATION=caps`; " +
				"with `SANDBOX_ISOLATION=gvisor`, register gVisor's `runsc` runtime with the Docker engine (Nomad: and list it in `allow_runtimes`). " + retry
	case errors.Is(err, dispatch.ErrUnavailable):
		return "the sandbox backend (Docker engine or Nomad) did not answer",
			fmt.Sprintf("It was tried %d times over %s. If `/retry` fails too, tell the bot's operator.", dispatchTries, deadline)
	case strings.Contains(msg, "mint token"), strings.Contains(msg, "create app client"):
		return "the bot could not get a GitHub token for this repository",
			"Check that the App is installed on this repository with its permissions accepted. " + retry
	case strings.HasPrefix(msg, "lock "):
		return "the bot could not take this issue's lock in its backend",
			"If `/retry` fails too, tell the bot's operator."
	case strings.Contains(msg, "submit "):
		return "the sandbox backend refused the run",
			fmt.Sprintf("It was tried up to %d times over %s. If `/retry` fails too, tell the bot's operator.", dispatchTries, deadline)
	}
	return "the bot hit an error before the sandbox started (reading the issue, its configuration or permissions)",
		"`/retry` tries again; if it fails too, tell the bot's operator."
}
