package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// labelTries bounds the retries of one label write that GitHub refused
// for a passing reason.
const labelTries = 3

// setState shows state on an issue or PR: its label is added, then the
// other state labels are removed, so the issue never goes without one
// while one is due. Callers hold the issue's lock, so two replicas never
// write labels at once; each write is tried again when GitHub refuses it
// for a passing reason, and an error that remains is returned to the
// caller, which reports it.
func (c *core) setState(ctx context.Context, gh hub.GitHub, number int, state lifecycle.State) error {
	label := state.Label()
	issue, err := gh.Issue(ctx, number)
	if err != nil {
		return fmt.Errorf("read the labels of #%d: %w", number, err)
	}
	has := false
	var stale []string
	for _, l := range issue.Labels {
		switch name := l.GetName(); {
		case name == label:
			has = true
		case slices.Contains(lifecycle.Labels, name):
			stale = append(stale, name)
		}
	}
	var errs []error
	if label != "" && !has {
		errs = append(errs, retryGitHub(ctx, c.retryWait, func() error { return gh.AddLabels(ctx, number, label) }))
	}
	for _, name := range stale {
		errs = append(errs, retryGitHub(ctx, c.retryWait, func() error {
			if err := gh.RemoveLabel(ctx, number, name); err != nil && !errors.Is(err, hub.ErrNotFound) {
				return err
			}
			return nil
		}))
	}
	if err := errors.Join(errs...); err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Str("state", string(state)).Msg("state label not written")
		return fmt.Errorf("show %s on #%d: %w", state, number, err)
	}
	return nil
}

// retryGitHub tries write up to labelTries times while GitHub refuses it
// for a passing reason (transientGitHubError), waiting wait, then four
// times as long.
func retryGitHub(ctx context.Context, wait time.Duration, write func() error) error {
	var err error
	for try := 1; try <= labelTries; try++ {
		if err = write(); err == nil || !transientGitHubError(err) || try == labelTries {
			return err
		}
		if !pause(ctx, time.Duration(try*try)*wait) {
			return err
		}
	}
	return err
}
