package handlers

import (
	"context"
	"fmt"
	"time"
)

// Idle waits until no follower has anything left to do: every run still
// followed is one the backend reports as not ended, so its follower is
// only waiting on the sandbox. Tests use it to assert that nothing more
// happens (no second run, no second comment) without sleeping; it returns
// ctx's error, naming the busy runs, if that does not happen in time.
func (r *Runs) Idle(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		busy, err := r.busy(ctx)
		if err != nil {
			return err
		}
		if len(busy) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("runs not idle: %w (followers still finishing %v)", ctx.Err(), busy)
		case <-t.C:
		}
	}
}

// busy lists the followed runs whose follower has work to do: the run
// ended (its result is being posted) or is gone from the backend.
func (r *Runs) busy(ctx context.Context) ([]string, error) {
	var busy []string
	for _, id := range r.Active() {
		st, err := r.b.Backend.Status(ctx, id)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("runs not idle: %w", ctx.Err())
		}
		if err != nil || st.State.Ended() {
			busy = append(busy, id)
		}
	}
	return busy, nil
}
