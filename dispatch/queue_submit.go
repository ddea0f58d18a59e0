package dispatch

import (
	"context"
	"fmt"
	"time"
)

// RunLister lists a backend's runs (Backend.List).
type RunLister interface {
	List(ctx context.Context) ([]RunStatus, error)
}

// QueueBackend is what queueing a run needs of a backend: its queue and
// its runs.
type QueueBackend interface {
	Queue
	RunLister
}

// LiveRuns are the runs b has not seen end: what holds the slots.
func LiveRuns(ctx context.Context, b RunLister) ([]Meta, error) {
	runs, err := b.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	live := make([]Meta, 0, len(runs))
	for _, r := range runs {
		if !r.State.Ended() {
			live = append(live, r.Meta)
		}
	}
	return live, nil
}

// AdmitLive is Admit with the live runs read from b. An empty queue has
// nothing to admit, and the live runs are not read: the bot admits at the
// end of every run, and reading them is a listing of every run (on the
// docker backend two docker CLI calls, one inspecting every container).
// A run queued after the queue was read here is admitted by its own
// SubmitQueued.
func AdmitLive(ctx context.Context, b QueueBackend, caps Caps, now time.Time) (Admission, error) {
	if q, err := b.ReadQueue(ctx); err == nil && len(q) == 0 {
		return Admission{}, nil
	}
	live, err := LiveRuns(ctx, b)
	if err != nil {
		return Admission{}, err
	}
	return Admit(ctx, b, caps, live, now)
}

// Unsubmitted are the claimed entries whose run is not on b at all (not
// even ended): runs a bot admitted and did not submit, because it stopped
// (or is submitting them now). Submitted are the claimed entries whose run
// is on b. A bot that starts resumes the first (submission is idempotent
// by task id, so a replica submitting one now is harmless) and drops the
// saved requests of the second.
func Unsubmitted(ctx context.Context, b QueueBackend) (unsubmitted, submitted []QueueEntry, err error) {
	q, err := b.ReadQueue(ctx)
	if err != nil || len(q) == 0 {
		return nil, nil, err
	}
	runs, err := b.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	on := map[string]bool{}
	for _, r := range runs {
		on[r.Meta.TaskID] = true
	}
	for _, e := range q {
		switch {
		case e.Waiting():
		case on[e.TaskID]:
			submitted = append(submitted, e)
		default:
			unsubmitted = append(unsubmitted, e)
		}
	}
	return unsubmitted, submitted, nil
}

// Submission is what queueing one run decided.
type Submission struct {
	// Admitted are the runs that took a slot: the caller starts them
	// (the submitted one among them when it goes at once).
	Admitted []QueueEntry
	// Self is true when the submitted run itself took a slot.
	Self bool
	// Place is the submitted run's place among the waiting runs when it
	// waits, 0 when it does not (it took a slot here or, in between, on
	// another replica).
	Place int
	// Recheck is when admission must run again (Admission.Recheck).
	Recheck time.Time
}

// SubmitQueued is how a run asked for under caps enters the queue: its
// request is kept, then in one change of the queue it is enqueued at the
// end (unless a redelivery put it there already), the free slots are
// handed out oldest first, and the answer says whether it goes now or its
// place.
func SubmitQueued(ctx context.Context, b QueueBackend, e QueueEntry, request []byte, caps Caps, now time.Time) (Submission, error) {
	var s Submission
	if err := b.SaveQueued(ctx, e.TaskID, request); err != nil {
		return s, err
	}
	live, err := LiveRuns(ctx, b)
	if err != nil {
		return s, err
	}
	err = b.UpdateQueue(ctx, func(cur []QueueEntry) ([]QueueEntry, error) {
		cur, added := appendNew(cur, e)
		next, admitted, changed := admit(cur, caps, live, now)
		s = Submission{Admitted: admitted, Place: Place(next, e.TaskID), Recheck: recheckAt(next, live)}
		for _, a := range admitted {
			s.Self = s.Self || a.TaskID == e.TaskID
		}
		if !added && !changed {
			return nil, ErrQueueUnchanged
		}
		return next, nil
	})
	if err != nil {
		return Submission{}, fmt.Errorf("queue %s: %w", e.TaskID, err)
	}
	return s, nil
}
