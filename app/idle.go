package app

import (
	"context"
	"fmt"
	"time"
)

// Idle waits until the bot has nothing left to do of its own: no webhook
// delivery queued or being handled, and no follower with a result to post
// (runs still going in their sandboxes do not count). It is how tests
// assert that nothing more happens, instead of sleeping.
func (s *Server) Idle(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if s.sched.inflight.Load() == 0 {
			if err := s.base.Runs.Idle(ctx); err != nil {
				return err
			}
			// A delivery may have arrived and started a follower while the
			// runs were checked: idle only if both hold at once.
			if s.sched.inflight.Load() == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bot not idle: %w (%d deliveries queued or being handled)", ctx.Err(), s.sched.inflight.Load())
		case <-t.C:
		}
	}
}
