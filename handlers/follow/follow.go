// Package follow is the run follower: it follows every run this replica
// started or found on the backend, from its submission to its end. While
// the run lives it shows its progress on GitHub (a check run on the head
// commit, or one progress comment before there is a commit), keeps its
// transcript, and replaces its repository token before it expires; when
// the run ends it revokes every token minted for it and hands the end to
// the engine (Ender), which posts the result and lets the run go. What
// this replica saw of each run is kept for /status (Runs.Seen).
package follow

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// Deps are what the follower works with, all given at once.
type Deps struct {
	Hub       hub.Hub
	Backend   dispatch.Backend
	Templates *templates.Set
	// Secrets learns the tokens of runs this bot did not mint, so that
	// nothing posted quotes them.
	Secrets *sanitize.Secrets
	Logger  zerolog.Logger
	Now     func() time.Time
	// Links are a run's pages, for the check run's links.
	Links Links
	// CheckName is the check run that shows a run's progress;
	// ProgressInterval throttles its updates; TokenRefresh is how often a
	// live run's token is replaced (tokens last an hour).
	CheckName        string
	ProgressInterval time.Duration
	TokenRefresh     time.Duration
	// WebURL is GitHub's web address, for a check run's link when an API
	// leaves it out.
	WebURL string
}

// Links are a run's pages: its live page and its dashboard entry ("" for
// none).
type Links interface {
	LiveURL(taskID string) string
	EntryURL(taskID string) string
}

// Transcript is one run's lines on their way to the store.
type Transcript interface {
	// Line keeps line seq (1, 2, ... in the run's log). It does not wait
	// for the store.
	Line(seq int, p dispatch.Progress)
	// Close keeps what is left; whole says the run's log was read to its
	// end.
	Close(whole bool)
}

// Ender is the engine's side of a followed run.
type Ender interface {
	// Transcript starts keeping the run's lines.
	Transcript(ctx context.Context, gh hub.GitHub, meta dispatch.Meta) Transcript
	// Ended is a run that ended, or vanished from the backend; its tokens
	// are revoked. prog is its progress, which the result completes.
	Ended(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, prog *Progress)
	// AsideEnded is a run aside the flow (a preview) that ended;
	// err is what waiting for it returned (the run gone).
	AsideEnded(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, st dispatch.RunStatus, err error)
}

// Runs follows runs until their end: one goroutine a run, which Stop
// waits for.
type Runs struct {
	d   Deps
	end Ender

	mu        sync.Mutex
	ctx       context.Context
	cancel    context.CancelFunc
	following map[string]bool
	aborted   map[string]string // task id -> who aborted
	tokens    runTokens         // every token minted for a live run
	board     *board
	// starting counts the work handed to Go that has not returned.
	starting atomic.Int64
	wg       sync.WaitGroup
}

// New builds the follower; end is told of each run's end.
func New(d Deps, end Ender) *Runs {
	ctx, cancel := context.WithCancel(context.Background())
	return &Runs{d: d, end: end, ctx: ctx, cancel: cancel, following: map[string]bool{}, aborted: map[string]string{},
		board: newBoard(d.WebURL)}
}

// Follow starts following a run unless it is already followed or the
// follower is stopping.
func (r *Runs) Follow(meta dispatch.Meta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.following[meta.TaskID] || r.ctx.Err() != nil {
		return
	}
	r.following[meta.TaskID] = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.following, meta.TaskID)
			r.mu.Unlock()
		}()
		r.follow(meta)
	}()
}

// Go runs f on a goroutine of its own that Stop waits for and Starting
// counts, on the follower's context (the bot's logger in it), unless the
// follower is stopping: then f does not run. The queue starts admitted
// runs with it.
func (r *Runs) Go(f func(ctx context.Context)) {
	r.mu.Lock()
	if r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	r.starting.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.starting.Add(-1)
		f(r.d.Logger.WithContext(r.ctx))
	}()
}

// Starting is how many functions handed to Go have not returned.
func (r *Runs) Starting() int64 { return r.starting.Load() }

// Stopping reports whether Stop was called.
func (r *Runs) Stopping() bool { return r.ctx.Err() != nil }

// Context is the follower's context, which Stop cancels, with the bot's
// logger in it.
func (r *Runs) Context() context.Context { return r.d.Logger.WithContext(r.ctx) }

// Active returns the task ids being followed.
func (r *Runs) Active() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.following {
		ids = append(ids, id)
	}
	return ids
}

// Stop stops following (the runs go on; a restarted bot reconciles them)
// and waits for followers to return.
func (r *Runs) Stop() {
	r.cancel()
	r.wg.Wait()
}

// Wait blocks until no run is followed (tests, draining).
func (r *Runs) Wait() { r.wg.Wait() }

// MarkAborted records that a person aborted the run, so its interrupted
// result is not continued automatically.
func (r *Runs) MarkAborted(taskID, by string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.aborted[taskID] = by
}

// AbortedBy says who aborted the run, if anyone did.
func (r *Runs) AbortedBy(taskID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	by, ok := r.aborted[taskID]
	return by, ok
}

// Seen is what this replica last saw of a run, for /status.
func (r *Runs) Seen(taskID string) (Seen, bool) { return r.board.get(taskID) }

// Progress is the progress of meta on gh: the run's check run, opened at
// once on a pull request's head.
func (r *Runs) Progress(ctx context.Context, gh hub.GitHub, meta dispatch.Meta) *Progress {
	return newProgress(ctx, r, gh, meta)
}

func (r *Runs) follow(meta dispatch.Meta) {
	log := r.d.Logger.With().Str("task_id", meta.TaskID).Str("repo", meta.Repo).Int("issue", meta.Number).
		Str("mode", string(meta.Mode)).Str("delivery_id", meta.DeliveryID).Logger()
	ctx := log.WithContext(r.ctx)
	gh, err := r.d.Hub.Repo(meta.InstallationID, meta.Repo)
	if err != nil {
		log.Error().Err(err).Msg("cannot follow run: no installation client")
		return
	}
	if lifecycle.KindOf(meta.Mode).Aside {
		st, err := r.d.Backend.Wait(ctx, meta.TaskID, nil)
		if ctx.Err() != nil {
			return // shutting down: the run goes on and is reconciled later
		}
		r.end.AsideEnded(ctx, gh, meta, st, err)
		return
	}
	prog := newProgress(ctx, r, gh, meta)
	r.adoptToken(ctx, meta.TaskID)
	refreshDone, refreshed := make(chan struct{}), make(chan struct{})
	go func() { defer close(refreshed); r.refreshTokens(ctx, meta, refreshDone) }()
	// Every line is kept as it is read, whether or not anyone watches,
	// numbered by its place in the log (Wait reads it from its start), as
	// the live page numbers it.
	tr, seq := r.end.Transcript(ctx, gh, meta), 0
	_, err = r.d.Backend.Wait(ctx, meta.TaskID, func(p dispatch.Progress) {
		seq++
		tr.Line(seq, p)
		prog.update(p)
	})
	tr.Close(err == nil)
	close(refreshDone)
	<-refreshed // no refresh mints a token after the run's are revoked
	if ctx.Err() != nil {
		return // shutting down: the run goes on and is reconciled later
	}
	if err != nil && !errors.Is(err, dispatch.ErrNotFound) {
		log.Error().Err(err).Msg("lost track of run")
		return
	}
	if errors.Is(err, dispatch.ErrNotFound) {
		log.Warn().Msg("run vanished from the backend")
	}
	r.endRun(ctx, meta.TaskID)
	r.end.Ended(ctx, gh, meta, prog)
}
