package handlers

import (
	"context"
	"fmt"
)

// Busy lists the followed runs whose follower still has work to do: the run
// ended (its result is being posted) or is gone from the backend. Runs still
// going in their sandboxes are not listed: their followers only wait. An
// empty list is how app.Server.Idle knows nothing more will happen.
func (b *Base) Busy(ctx context.Context) ([]string, error) {
	var busy []string
	if n := b.Runs.Starting(); n > 0 {
		busy = append(busy, fmt.Sprintf("%d batches of queued runs being started", n))
	}
	for _, id := range b.Runs.Active() {
		st, err := b.c.Backend.Status(ctx, id)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("status of %s: %w", id, ctx.Err())
		}
		if err != nil || st.State.Ended() {
			busy = append(busy, id)
		}
	}
	return append(busy, b.batches.pending(ctx)...), nil
}
