package nomad

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// watcher follows every watched run through one shared event stream, so
// watching a thousand runs costs one connection and no polling. It also
// remembers which job a task id maps to, and result.json once read.
type watcher struct {
	cl *cluster

	mu      sync.Mutex
	jobs    map[string]string // task id -> job id
	results map[string][]byte // alloc id -> result.json of an ended allocation
	runs    map[string]*watched
	// The stream runs while at least one run is watched.
	cancel    context.CancelFunc
	done      chan struct{}
	ready     chan struct{} // closed once the stream connected
	lastIndex uint64
	connects  int
	closed    bool
	closedCh  chan struct{} // wakes Waits when the backend closes
}

// watched is one run being waited on.
type watched struct {
	view    *runView
	refs    int
	changed chan struct{} // closed and replaced on every change
	gone    bool          // the job was purged
	// primed: the run was read by a query since it is watched; from then
	// on only the event stream (and the resync after a reconnect) moves it.
	primed bool
}

func newWatcher(cl *cluster) *watcher {
	return &watcher{cl: cl, jobs: map[string]string{}, results: map[string][]byte{}, runs: map[string]*watched{}, closedCh: make(chan struct{})}
}

func (w *watcher) remember(taskID, jobID string) {
	w.mu.Lock()
	w.jobs[taskID] = jobID
	w.mu.Unlock()
}

func (w *watcher) known(taskID string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, ok := w.jobs[taskID]
	return id, ok
}

func (w *watcher) forget(taskID, jobID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.jobs, taskID)
	if r := w.runs[jobID]; r != nil {
		for id := range r.view.allocs {
			delete(w.results, id)
		}
	}
}

func (w *watcher) cachedResult(allocID string) ([]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	raw, ok := w.results[allocID]
	return raw, ok
}

func (w *watcher) storeResult(allocID string, raw []byte) {
	w.mu.Lock()
	w.results[allocID] = raw
	w.mu.Unlock()
}

// Connects is how many times the event stream connected, for tests and
// metrics.
func (w *watcher) Connects() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.connects
}

// LastEventIndex is the index of the last event batch the stream applied.
func (w *watcher) LastEventIndex() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastIndex
}

// Close stops the event stream; Waits in progress return an error and
// close their log streams.
func (w *watcher) Close() error {
	w.mu.Lock()
	if !w.closed {
		close(w.closedCh)
	}
	w.closed = true
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// watch registers interest in a job, starts the stream if needed, and
// primes the run from a query once the stream is connected, so that no
// change falls between the query and the first event.
func (w *watcher) watch(ctx context.Context, jobID string) (*watched, func(), error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, nil, errors.New("nomad backend is closed")
	}
	r := w.runs[jobID]
	if r == nil {
		r = &watched{view: newRunView(jobID), changed: make(chan struct{})}
		w.runs[jobID] = r
	}
	r.refs++
	if w.cancel == nil {
		sctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.done, w.ready = cancel, make(chan struct{}), make(chan struct{})
		go w.loop(sctx, w.done, w.ready)
	}
	ready := w.ready
	w.mu.Unlock()

	release := func() {
		w.mu.Lock()
		r.refs--
		if r.refs == 0 {
			delete(w.runs, jobID)
		}
		var cancel context.CancelFunc
		var done chan struct{}
		if len(w.runs) == 0 && w.cancel != nil {
			cancel, done = w.cancel, w.done
			w.cancel, w.done = nil, nil
		}
		w.mu.Unlock()
		if cancel != nil {
			cancel()
			<-done
		}
	}
	select {
	case <-ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	case <-w.closedCh:
		release()
		return nil, nil, errors.New("nomad backend is closed")
	}
	if err := w.prime(ctx, r); err != nil {
		release()
		return nil, nil, err
	}
	return r, release, nil
}

// prime merges a fresh query into a watched run.
func (w *watcher) prime(ctx context.Context, r *watched) error {
	jobID := r.view.jobID
	v, err := w.cl.fetchView(ctx, jobID)
	w.mu.Lock()
	defer w.mu.Unlock()
	if errors.Is(err, dispatch.ErrNotFound) {
		r.gone = true
		r.notify()
		return nil
	}
	if err != nil {
		return err
	}
	r.view.setJob(&api.Job{Status: &v.jobStatus, Stop: &v.jobStop, CreateIndex: &v.jobCreateIndex, ModifyIndex: &v.jobModifyIndex})
	if v.meta.TaskID != "" {
		r.view.meta = v.meta
	}
	for _, a := range v.allocs {
		r.view.merge(a)
	}
	r.primed = true
	r.notify()
	return nil
}

func (r *watched) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// snapshot copies the run's view under the lock.
func (w *watcher) snapshot(r *watched) (*runView, bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := *r.view
	c.allocs = make(map[string]*allocView, len(r.view.allocs))
	for k, a := range r.view.allocs {
		c.allocs[k] = a
	}
	return &c, r.gone, r.changed
}

// loop keeps the event stream connected, resuming after the last index it
// applied. After every reconnect it re-reads the watched runs: Nomad's
// event buffer is short, and a drop may outlast it.
func (w *watcher) loop(ctx context.Context, done, ready chan struct{}) {
	defer close(done)
	log := w.cl.log.With().Str("component", "event-stream").Logger()
	backoff := 100 * time.Millisecond
	first := true
	topics := map[api.Topic][]string{api.TopicJob: {"*"}, api.TopicAllocation: {"*"}}
	for ctx.Err() == nil {
		w.mu.Lock()
		from := w.lastIndex
		if from > 0 {
			from++ // the stream includes the batch at the index asked for
		}
		w.mu.Unlock()
		if first && from == 0 {
			// Start from now rather than replaying Nomad's whole buffer:
			// the runs are primed by a query once connected.
			if _, qm, err := w.cl.c.Jobs().List(withPrefix(w.cl.qopts(ctx), w.cl.o.JobPrefix)); err == nil {
				from = qm.LastIndex + 1
			}
		}
		events, err := w.cl.c.EventStream().Stream(ctx, topics, from, w.cl.qopts(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn().Err(err).Uint64("from_index", from).Dur("retry_in", backoff).Msg("cannot open the Nomad event stream")
			sleep(ctx, backoff)
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		w.mu.Lock()
		w.connects++
		// Nothing before from is news any more, even if no event
		// arrives before the next drop.
		if from > 0 && from-1 > w.lastIndex {
			w.lastIndex = from - 1
		}
		w.mu.Unlock()
		log.Debug().Uint64("from_index", from).Msg("event stream connected")
		if first {
			close(ready)
			first = false
		} else {
			go w.resync(ctx)
		}
		backoff = 100 * time.Millisecond
		for evs := range events {
			if evs.Err != nil {
				if ctx.Err() == nil {
					log.Warn().Err(evs.Err).Uint64("last_index", w.lastIndexLocked()).Msg("event stream dropped; reconnecting from the last index")
				}
				break
			}
			w.apply(evs)
		}
		if ctx.Err() == nil {
			sleep(ctx, backoff)
		}
	}
}

func (w *watcher) lastIndexLocked() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastIndex
}

func (w *watcher) resync(ctx context.Context) {
	w.mu.Lock()
	runs := make([]*watched, 0, len(w.runs))
	for _, r := range w.runs {
		runs = append(runs, r)
	}
	w.mu.Unlock()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := w.prime(ctx, r); err != nil && ctx.Err() == nil {
				w.cl.log.Warn().Err(err).Str("job_id", r.view.jobID).Msg("re-reading a run after the event stream reconnected failed")
			}
		}()
	}
	wg.Wait()
}

// apply merges one batch. Events of jobs nobody waits on are skipped
// before their payload is decoded.
func (w *watcher) apply(evs *api.Events) {
	for i := range evs.Events {
		ev := &evs.Events[i]
		jobID := ev.Key
		if ev.Topic == api.TopicAllocation {
			jobID = ""
			if len(ev.FilterKeys) > 0 {
				jobID = ev.FilterKeys[0]
			}
		}
		w.mu.Lock()
		r := w.runs[jobID]
		w.mu.Unlock()
		if r == nil && jobID != "" {
			continue
		}
		switch ev.Topic {
		case api.TopicJob:
			job, err := ev.Job()
			if err != nil || job == nil {
				continue
			}
			w.mu.Lock()
			r.view.setJob(job)
			r.notify()
			w.mu.Unlock()
		case api.TopicAllocation:
			a, err := ev.Allocation()
			if err != nil || a == nil {
				continue
			}
			w.mu.Lock()
			if r == nil {
				r = w.runs[a.JobID]
			}
			if r != nil {
				r.view.mergeAlloc(a)
				r.notify()
			}
			w.mu.Unlock()
		}
	}
	w.mu.Lock()
	if evs.Index > w.lastIndex {
		w.lastIndex = evs.Index
	}
	w.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Wait implements dispatch.Backend. It follows the run on the shared event
// stream and, when progress is set, the sandbox's stdout for progress
// lines. On the end of the run it removes the token Variable.
func (b *runWatch) Wait(ctx context.Context, taskID string, progress func(dispatch.Progress)) (dispatch.RunStatus, error) {
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return dispatch.RunStatus{}, err
	}
	r, release, err := b.w.watch(ctx, id)
	if err != nil {
		return dispatch.RunStatus{}, fmt.Errorf("wait for %s: %w", taskID, err)
	}
	defer release()
	var logs *logStream
	defer func() { logs.close() }()
	var drain <-chan time.Time
	for {
		v, gone, changed := b.w.snapshot(r)
		if gone {
			return dispatch.RunStatus{}, fmt.Errorf("wait for %s: job %s was purged: %w", taskID, id, dispatch.ErrNotFound)
		}
		st := v.status()
		if a := v.latest(); progress != nil && logs == nil && a != nil && a.ClientStatus != api.AllocClientStatusPending && a.ClientStatus != api.AllocClientStatusLost {
			logs = b.newLogStream(v.meta, id, a, progress)
			logs.open(ctx)
		}
		if st.State.Ended() {
			if logs != nil && !logs.done && drain == nil {
				// Give the follower a moment for the last lines.
				t := time.NewTimer(b.o.LogDrain)
				defer t.Stop()
				drain = t.C
			}
			if logs == nil || logs.done {
				final := b.classify(ctx, v)
				rl := b.runLogger(v.meta, id)
				b.deleteToken(context.WithoutCancel(ctx), id, rl)
				rl.Info().Str("state", string(final.State)).Int("exit_code", final.ExitCode).Msg("sandbox run ended")
				return final, nil
			}
		}
		frames, errc, retry := logs.channels()
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-b.w.closedCh:
			return st, fmt.Errorf("wait for %s: the nomad backend was closed", taskID)
		case <-changed:
		case fr, ok := <-frames:
			logs.onFrame(fr, ok)
		case err := <-errc:
			logs.onError(err)
		case <-retry:
			logs.onRetry(ctx)
		case <-drain:
			logs.close()
		}
	}
}
