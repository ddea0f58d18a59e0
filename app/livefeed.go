package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// liveFeeds follow runs for the live pages open on this replica: one
// follower per run however many people watch it, reading the run's
// progress lines from the backend (Backend.Wait replays the run's log from
// its start and follows it), never from the replica that started the run.
// So any replica can serve any run's page, and a restarted bot serves it
// again from the same lines, numbered the same way.
type liveFeeds struct {
	backend dispatch.Backend
	log     zerolog.Logger
	// linger keeps a feed nobody watches for a while: a page that
	// reconnects (a restart, a flaky network) finds it still there.
	linger time.Duration
	// maxLines bounds what one feed keeps; the runner bounds its detailed
	// lines (runner/progress.go), this bounds everything else.
	maxLines int

	mu    sync.Mutex
	feeds map[string]*liveFeed
}

// liveFeed is one run's lines as the backend holds them.
type liveFeed struct {
	mu      sync.Mutex
	lines   []liveLine
	changed chan struct{} // closed and replaced on every change
	ended   bool
	status  dispatch.RunStatus
	err     error
	watch   int // subscribers
	cancel  context.CancelFunc
	idle    *time.Timer
}

// liveLine is one progress line with its place in the run's log and when
// this replica read it (the latency benchmark compares the two times).
type liveLine struct {
	Seq     int
	Read    time.Time
	Payload dispatch.Progress
}

// maxRunLines bounds what the bot holds and keeps of one run's lines (the
// live feed, the transcript); the runner bounds its detailed lines
// (runner/progress.go), this bounds everything else.
const maxRunLines = 20000

func newLiveFeeds(b dispatch.Backend, log zerolog.Logger) *liveFeeds {
	return &liveFeeds{backend: b, log: log, linger: 2 * time.Minute, maxLines: maxRunLines, feeds: map[string]*liveFeed{}}
}

// watch returns the run's feed, starting its follower if needed, and a
// function that releases it.
func (h *liveFeeds) watch(taskID string) (*liveFeed, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.feeds[taskID]
	if !ok {
		ctx, cancel := context.WithCancel(context.Background())
		f = &liveFeed{changed: make(chan struct{}), cancel: cancel}
		h.feeds[taskID] = f
		go h.follow(ctx, taskID, f)
	}
	f.mu.Lock()
	f.watch++
	if f.idle != nil {
		f.idle.Stop()
		f.idle = nil
	}
	f.mu.Unlock()
	var once sync.Once
	return f, func() { once.Do(func() { h.release(taskID, f) }) }
}

func (h *liveFeeds) release(taskID string, f *liveFeed) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watch--; f.watch > 0 {
		return
	}
	f.idle = time.AfterFunc(h.linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.watch > 0 || h.feeds[taskID] != f {
			return
		}
		delete(h.feeds, taskID)
		f.cancel()
	})
}

// close stops every follower (the server is shutting down).
func (h *liveFeeds) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, f := range h.feeds {
		f.cancel()
		delete(h.feeds, id)
	}
}

// follow reads the run's lines from the backend until it ends. A follow
// that breaks while the run lives (the engine restarted, Nomad's stream
// dropped) starts over from the log's beginning and skips the lines it
// has, which keeps the numbering the backend's.
func (h *liveFeeds) follow(ctx context.Context, taskID string, f *liveFeed) {
	log := h.log.With().Str("task_id", taskID).Logger()
	for attempt := 0; ; attempt++ {
		seq := 0
		st, err := h.backend.Wait(ctx, taskID, func(p dispatch.Progress) {
			seq++
			f.add(seq, p, h.maxLines)
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil || errors.Is(err, dispatch.ErrNotFound) || attempt >= 5 {
			f.end(st, err)
			return
		}
		log.Warn().Err(err).Int("attempt", attempt+1).Msg("live page: following the run failed; starting over")
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(attempt+1) * 500 * time.Millisecond):
		}
	}
}

func (f *liveFeed) add(seq int, p dispatch.Progress, max int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq <= len(f.lines) || len(f.lines) >= max {
		return // read before a restart of the follow, or past the bound
	}
	f.lines = append(f.lines, liveLine{Seq: seq, Read: time.Now(), Payload: p})
	f.notifyLocked()
}

func (f *liveFeed) end(st dispatch.RunStatus, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended, f.status, f.err = true, st, err
	f.notifyLocked()
}

func (f *liveFeed) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// since returns the lines after seq, whether the run has ended, and a
// channel closed at the next change.
func (f *liveFeed) since(seq int) (lines []liveLine, ended bool, err error, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq < len(f.lines) {
		lines = append(lines, f.lines[max(seq, 0):]...)
	}
	return lines, f.ended, f.err, f.changed
}
