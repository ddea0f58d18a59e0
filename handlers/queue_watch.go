package handlers

import (
	"sync"
	"time"
)

// claimWatch re-runs admission when the oldest claim whose run has not
// shown on the backend ends its grace (dispatch.Admission.Recheck). A
// claim is left without a run when its bot stopped, or its start could
// not be tried (GitHub did not answer): without the watch it would hold
// its slot until some run ended, and with no run going, for ever. The
// time is the bot's clock (core.Now) and the timer its AfterFunc, which
// tests replace.
type claimWatch struct {
	c    *core
	fire func() // admission, on the follower's goroutines

	mu   sync.Mutex
	at   time.Time // when the armed timer fires; zero: none
	stop func() bool
}

// watch arms the timer for at unless one fires at or before it (that one's
// admission arms the next); a zero at asks for nothing.
func (w *claimWatch) watch(at time.Time) {
	if at.IsZero() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.at.IsZero() && !at.Before(w.at) {
		return
	}
	if w.stop != nil {
		w.stop()
	}
	w.at = at
	w.stop = w.c.AfterFunc(max(at.Sub(w.c.Now()), 0), func() {
		w.mu.Lock()
		w.at, w.stop = time.Time{}, nil
		w.mu.Unlock()
		w.fire()
	})
}

// close stops the timer (the bot is stopping).
func (w *claimWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
	w.at, w.stop = time.Time{}, nil
}

// afterFunc is the real timer behind Wiring.AfterFunc.
func afterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
