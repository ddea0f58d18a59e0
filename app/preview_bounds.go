package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// What one run and one viewer can cost the bot. A preview ticket (or a
// preview origin's cookie) is a bearer capability that a page can send
// anywhere, so whoever holds one must not be able to exhaust the bot:
// requests are bounded per run and per viewer, a request waits a little
// for a slot and is then refused, lookups of the run are cached, and every
// connection to a dev server closes after a quiet spell. Before any of
// that, each viewer of a run has a request rate (a token bucket): a flood
// past it is refused before the run is looked up or a slot is asked for,
// so what it costs the bot is a map look-up and a paused answer per
// request, not a proxied request each.

// previewBounds are the caps; defaultPreviewBounds what the bot uses.
type previewBounds struct {
	// perRun and perViewer bound the requests (a WebSocket counts for its
	// life) being proxied at once to one run, and for one viewer (a
	// ticket's or cookie's person) to one run.
	perRun, perViewer int
	// queue bounds the requests waiting for a slot of one key; wait is how
	// long one waits before it is refused.
	queue int
	wait  time.Duration
	// rate and burst are one viewer's requests per second to one run,
	// and how many may come at once: a dev server's first page load
	// (Vite serves each module on its own: hundreds) fits in the burst.
	rate  rate.Limit
	burst int
}

var defaultPreviewBounds = previewBounds{perRun: 64, perViewer: 48, queue: 128, wait: 10 * time.Second, rate: 100, burst: 400}

// previewRateKeys bounds the viewers' buckets kept; past it they start
// afresh (keys come from sealed tickets and cookies, not from the client).
const previewRateKeys = 4096

// errPreviewBusy is a request over the bounds.
var errPreviewBusy = errors.New("this preview is busy (too many requests at once); try again in a moment")

// errPreviewRate is a request over its viewer's rate.
var errPreviewRate = errors.New("too many requests to this preview; try again in a moment")

// previewLimits hands out the slots.
type previewLimits struct {
	b     previewBounds
	mu    sync.Mutex
	slots map[string]*slotGate
	rates map[string]*rate.Limiter
}

type slotGate struct {
	slots   chan struct{}
	waiting int
	users   int // holders and waiters, for removal when idle
}

func newPreviewLimits(b previewBounds) *previewLimits {
	return &previewLimits{b: b, slots: map[string]*slotGate{}, rates: map[string]*rate.Limiter{}}
}

// overRate reports whether the viewer's request to the run is past their
// rate; it takes a token when it is not.
func (l *previewLimits) overRate(task, viewer string) bool {
	key := task + "\x00" + viewer
	l.mu.Lock()
	lim := l.rates[key]
	if lim == nil {
		if len(l.rates) >= previewRateKeys {
			clear(l.rates)
		}
		lim = rate.NewLimiter(l.b.rate, l.b.burst)
		l.rates[key] = lim
	}
	l.mu.Unlock()
	return !lim.Allow()
}

// enter takes a slot of the viewer's and one of the run's, waiting at most
// the bound; release gives both back.
func (l *previewLimits) enter(ctx context.Context, task, viewer string) (release func(), err error) {
	vKey, rKey := "v\x00"+task+"\x00"+viewer, "r\x00"+task
	leaveV, err := l.take(ctx, vKey, l.b.perViewer)
	if err != nil {
		return nil, err
	}
	leaveR, err := l.take(ctx, rKey, l.b.perRun)
	if err != nil {
		leaveV()
		return nil, err
	}
	return func() { leaveR(); leaveV() }, nil
}

func (l *previewLimits) take(ctx context.Context, key string, size int) (func(), error) {
	l.mu.Lock()
	g := l.slots[key]
	if g == nil {
		g = &slotGate{slots: make(chan struct{}, size)}
		l.slots[key] = g
	}
	g.users++
	select {
	case g.slots <- struct{}{}:
		l.mu.Unlock()
		return func() { <-g.slots; l.leave(key, g) }, nil
	default:
	}
	if g.waiting >= l.b.queue {
		l.mu.Unlock()
		l.leave(key, g)
		return nil, errPreviewBusy
	}
	g.waiting++
	l.mu.Unlock()
	t := time.NewTimer(l.b.wait)
	defer t.Stop()
	var err error
	select {
	case g.slots <- struct{}{}:
	case <-t.C:
		err = errPreviewBusy
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.mu.Lock()
	g.waiting--
	l.mu.Unlock()
	if err != nil {
		l.leave(key, g)
		return nil, err
	}
	return func() { <-g.slots; l.leave(key, g) }, nil
}

func (l *previewLimits) leave(key string, g *slotGate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g.users--; g.users == 0 && l.slots[key] == g {
		delete(l.slots, key)
	}
}

// runCacheTTL is how long a run's state is taken as read: a run that
// ends is refused at most this much later.
const runCacheTTL = 2 * time.Second

// runCacheMax bounds the cached runs; past it, entries are dropped.
const runCacheMax = 4096

// runCache caches the backend's view of runs for the preview: on Docker
// each look costs a `docker container inspect` process, on Nomad API
// calls. Concurrent looks at one run make one call.
type runCache struct {
	backend dispatch.Backend
	ttl     time.Duration
	group   singleflight.Group
	mu      sync.Mutex
	runs    map[string]cachedRun
}

type cachedRun struct {
	run liveRun
	err error
	at  time.Time
}

func newRunCache(b dispatch.Backend, ttl time.Duration) *runCache {
	return &runCache{backend: b, ttl: ttl, runs: map[string]cachedRun{}}
}

// get returns the run as the backend saw it at most ttl ago; errNoRun for
// a run it does not know.
func (c *runCache) get(ctx context.Context, task string) (liveRun, error) {
	if !dispatch.ValidTaskID(task) {
		return liveRun{}, errNoRun
	}
	c.mu.Lock()
	e, ok := c.runs[task]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.ttl {
		return e.run, e.err
	}
	v, _, _ := c.group.Do(task, func() (any, error) {
		// One look serves every waiter: it must not end with the request
		// that happened to start it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		var e cachedRun
		st, err := c.backend.Status(lctx, task)
		switch {
		case err == nil:
			e.run = liveRun{Meta: st.Meta, State: st.State, Started: st.StartedAt}
		case errors.Is(err, dispatch.ErrNotFound):
			e.err = errNoRun
		default:
			e.err = fmt.Errorf("run %s: %w", task, err)
		}
		e.at = time.Now()
		c.mu.Lock()
		if len(c.runs) >= runCacheMax {
			clear(c.runs)
		}
		c.runs[task] = e
		c.mu.Unlock()
		return e, nil
	})
	e = v.(cachedRun)
	return e.run, e.err
}

// quietConn closes a connection that has moved no byte either way for
// its quiet time. It works whatever the backend's connection (a Unix
// socket, a Nomad exec session, which keeps no deadlines).
type quietConn struct {
	net.Conn
	quiet time.Duration
	last  atomic.Int64
	timer *time.Timer
}

func newQuietConn(c net.Conn, quiet time.Duration) *quietConn {
	q := &quietConn{Conn: c, quiet: quiet}
	q.last.Store(time.Now().UnixNano())
	q.timer = time.AfterFunc(quiet, q.check)
	return q
}

func (q *quietConn) check() {
	idle := time.Since(time.Unix(0, q.last.Load()))
	if idle >= q.quiet {
		_ = q.Conn.Close()
		return
	}
	q.timer.Reset(q.quiet - idle)
}

func (q *quietConn) Read(b []byte) (int, error) {
	n, err := q.Conn.Read(b)
	if n > 0 {
		q.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (q *quietConn) Write(b []byte) (int, error) {
	n, err := q.Conn.Write(b)
	if n > 0 {
		q.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (q *quietConn) Close() error {
	q.timer.Stop()
	return q.Conn.Close()
}

// CloseWrite passes the proxy's half-close on, where the connection has one.
func (q *quietConn) CloseWrite() error {
	if cw, ok := q.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
