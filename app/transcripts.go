package app

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
)

// transcriptKeeper keeps every run's progress lines in the store as the
// bot's follower of the run reads them (handlers.Runs follows each run to
// its result, whether or not a page is open), cleaned as the live page
// cleans what it sends, and numbered as the live page numbers them. The
// follower never waits for the database: each run's writer takes the
// lines that arrived meanwhile in one transaction, so a slow database
// makes batches, not a slow follower.
type transcriptKeeper struct {
	store receipts.Transcripts
	// event turns a line into what the page shows (livePages.event).
	event func(liveLine) liveEvent
	log   zerolog.Logger
	// maxLines bounds a run's transcript as the live feed bounds it.
	maxLines int
	// closeWait bounds how long the follower waits, at the run's end, for
	// its last lines to be kept.
	closeWait time.Duration
}

// Transcript starts keeping one run's lines.
func (k *transcriptKeeper) Transcript(ctx context.Context, meta dispatch.Meta, title string) follow.Transcript {
	w := &transcriptWriter{
		k: k, ctx: context.WithoutCancel(ctx), log: k.log.With().Str("task_id", meta.TaskID).Logger(),
		head: receipts.Head{TaskID: meta.TaskID, Repo: meta.Repo, RepoID: meta.RepoID, InstallationID: meta.InstallationID,
			Number: meta.Number, Mode: string(meta.Mode), Title: title},
		wake: make(chan struct{}, 1), closed: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run()
	return w
}

// transcriptWriter is one run's lines on their way to the store.
type transcriptWriter struct {
	k    *transcriptKeeper
	ctx  context.Context
	log  zerolog.Logger
	head receipts.Head

	mu      sync.Mutex
	pending []receipts.Line
	whole   bool
	wake    chan struct{}
	closed  chan struct{}
	done    chan struct{}
	once    sync.Once
}

func (w *transcriptWriter) Line(seq int, p dispatch.Progress) {
	if seq > w.k.maxLines {
		return
	}
	data, err := json.Marshal(w.k.event(liveLine{Seq: seq, Payload: p}))
	if err != nil {
		return
	}
	w.mu.Lock()
	w.pending = append(w.pending, receipts.Line{Seq: seq, Data: data})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *transcriptWriter) Close(whole bool) {
	w.once.Do(func() {
		w.mu.Lock()
		w.whole = whole
		w.mu.Unlock()
		close(w.closed)
	})
	select {
	case <-w.done:
	case <-time.After(w.k.closeWait):
		w.log.Error().Dur("waited", w.k.closeWait).Msg("the run's last lines are not kept yet; the store is slow or down, the writer keeps trying a while")
	}
}

// run keeps the head, then every batch of lines as it comes, until the
// run's follower closes the transcript and the last lines are kept.
func (w *transcriptWriter) run() {
	defer close(w.done)
	headKept := false
	failures := 0
	var giveUp <-chan time.Time
	for {
		closing := false
		select {
		case <-w.wake:
		case <-w.closed:
			closing = true
		}
		if closing && giveUp == nil {
			giveUp = time.After(2 * time.Minute)
		}
		if !headKept {
			headKept = w.k.store.Begin(w.ctx, w.head) == nil
		}
		err := w.flush()
		w.mu.Lock()
		left, whole := len(w.pending), w.whole
		w.mu.Unlock()
		if err == nil && left == 0 && closing {
			if whole {
				if err := w.k.store.Finish(w.ctx, w.head.TaskID); err != nil {
					w.log.Warn().Err(err).Msg("mark the run's transcript whole")
				}
			}
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		if failures == 1 {
			w.log.Warn().Err(err).Int("lines_waiting", left).Msg("keep the run's lines; trying again")
		}
		select {
		case <-giveUp:
			w.log.Error().Err(err).Int("lines_lost", left).Msg("the run's transcript is incomplete in the store: it did not answer for two minutes")
			return
		case <-time.After(min(time.Duration(failures)*time.Second, 30*time.Second)):
			w.poke()
		}
	}
}

// poke wakes run again.
func (w *transcriptWriter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// flush keeps the lines waiting, in one transaction; on failure they wait
// for the next try.
func (w *transcriptWriter) flush() error {
	w.mu.Lock()
	batch := w.pending
	w.pending = nil
	w.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	if _, err := w.k.store.Append(ctx, w.head.TaskID, batch); err != nil {
		w.mu.Lock()
		w.pending = append(batch, w.pending...)
		w.mu.Unlock()
		return err
	}
	return nil
}
