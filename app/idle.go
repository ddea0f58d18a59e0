package app

import (
	"context"
	"fmt"
	"time"
)

// Idle waits until the bot has nothing left to do of its own: no webhook
// delivery queued or being handled, no follower with a result to post
// (runs still going in their sandboxes do not count), and no progress
// update the pacer keeps to send later. It is how tests
// assert that nothing more happens, instead of sleeping.
func (s *Server) Idle(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		// Deliveries are counted before and after the runs are read: a
		// delivery handled in between may have started a follower.
		queued := s.sched.inflight.Load()
		busy, err := s.base.Busy(ctx)
		if err != nil {
			return fmt.Errorf("bot not idle: %w", err)
		}
		if queued == 0 && len(busy) == 0 && s.sched.inflight.Load() == 0 && s.pacer.owned.held() == 0 && s.routinesHaveBeenRead() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bot not idle: %w (%d deliveries queued or being handled, followers still finishing %v, %d progress updates waiting for GitHub's pace, routines read at start: %t)",
				ctx.Err(), s.sched.inflight.Load(), busy, s.pacer.owned.held(), s.routinesHaveBeenRead())
		case <-t.C:
		}
	}
}

// routinesHaveBeenRead reports whether the start's read of every installed
// repository's routines has ended (true when they were never started).
func (s *Server) routinesHaveBeenRead() bool {
	if s.routinesRead == nil {
		return true
	}
	select {
	case <-s.routinesRead:
		return true
	default:
		return false
	}
}
