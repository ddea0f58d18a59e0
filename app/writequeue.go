package app

import (
	"context"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// paceClock is the time the pacer paces by; its tests advance their own.
type paceClock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed; stop cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// sleepOn waits d on clock, or until ctx ends.
func sleepOn(ctx context.Context, clock paceClock, d time.Duration) error {
	done := make(chan struct{})
	stop := clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}

// classRank orders the write classes: lower goes first.
func classRank(c hub.WriteClass) int {
	switch c {
	case hub.WriteResult:
		return 0
	case hub.WriteNormal:
		return 1
	case hub.WriteAfterResult:
		return 2
	}
	return 3
}

// writeState is where a waiting write is.
type writeState int

const (
	writeQueued writeState = iota
	writeGranted
	writeDropped // superseded, or withdrawn at shutdown
)

// pendingWrite is a write waiting for its turn in its installation's pace.
type pendingWrite struct {
	class hub.WriteClass
	key   string // method and path: writes of one key go one at a time, in order
	state writeState
	// granted is closed when the write may go (a caller waits on it).
	granted chan struct{}
	queued  time.Time
	// owned is the request the pacer sends itself (a progress update its
	// caller did not wait for).
	owned *ownedWrite
}

type ownedWrite struct {
	req  *http.Request
	next http.RoundTripper
}

// installationPace is one installation's pace: a token bucket below
// GitHub's secondary limit, the writes waiting for it by class, and the
// time a rate-limit answer holds every request until.
type installationPace struct {
	p      *githubPacer
	mu     sync.Mutex
	writes *rate.Limiter
	until  time.Time
	queue  []*pendingWrite
	// inflight counts the writes of a key sent and not yet answered.
	inflight map[string]int
	stop     func() bool // the armed timer of the next turn
}

func newInstallationPace(p *githubPacer) *installationPace {
	return &installationPace{p: p, writes: rate.NewLimiter(rate.Limit(p.perMinute/60), writeBurst(p.perMinute)), inflight: map[string]int{}}
}

// enqueue puts w in line, behind the writes of its class and above; a
// queued progress update of w's key is dropped (w replaces it). Then
// writes go as the pace allows. Callers hold ip.mu.
func (ip *installationPace) enqueueLocked(w *pendingWrite) {
	w.queued, w.granted = ip.p.clock.Now(), make(chan struct{})
	ip.queue = slices.DeleteFunc(ip.queue, func(q *pendingWrite) bool {
		if q.key != w.key || q.class != hub.WriteProgress {
			return false
		}
		ip.dropLocked(q, "superseded")
		return true
	})
	at := len(ip.queue)
	for i, q := range ip.queue {
		if classRank(q.class) > classRank(w.class) {
			at = i
			break
		}
	}
	ip.queue = slices.Insert(ip.queue, at, w)
	ip.pumpLocked()
}

// dropLocked takes q out of the pace unsent.
func (ip *installationPace) dropLocked(q *pendingWrite, reason string) {
	q.state = writeDropped
	ip.p.delayed.WithLabelValues(reason).Inc()
	if q.owned != nil {
		ip.p.owned.done()
	}
}

// pumpLocked grants the writes the pace allows now, highest class first,
// and arms a timer for the next one. A progress update goes only while the
// bucket is more than half full: the room below is kept for the others.
func (ip *installationPace) pumpLocked() {
	if ip.stop != nil {
		ip.stop()
		ip.stop = nil
	}
	for {
		now := ip.p.clock.Now()
		if now.Before(ip.until) {
			ip.armLocked(ip.until.Sub(now))
			return
		}
		i := slices.IndexFunc(ip.queue, func(w *pendingWrite) bool { return ip.inflight[w.key] == 0 })
		if i < 0 {
			return // nothing waits, or what waits follows a write of its key still on its way
		}
		w := ip.queue[i]
		need := 1.0
		if w.class == hub.WriteProgress {
			need = float64(ip.writes.Burst())/2 + 1
		}
		if have := ip.writes.TokensAt(now); have < need-1e-9 {
			ip.armLocked(time.Duration(math.Ceil((need - have) / float64(ip.writes.Limit()) * float64(time.Second))))
			return
		}
		ip.writes.AllowN(now, 1)
		ip.queue = slices.Delete(ip.queue, i, i+1)
		w.state = writeGranted
		ip.inflight[w.key]++
		if d := now.Sub(w.queued); d > 0 {
			ip.p.delayed.WithLabelValues("pace").Inc()
			ip.p.waited.WithLabelValues("pace").Observe(d.Seconds())
		}
		close(w.granted)
		if w.owned != nil {
			go ip.sendOwned(w)
		}
	}
}

func (ip *installationPace) armLocked(d time.Duration) {
	ip.stop = ip.p.clock.AfterFunc(d, func() {
		ip.mu.Lock()
		defer ip.mu.Unlock()
		ip.pumpLocked()
	})
}

// sent ends a granted write of key: the next write of that key may go.
func (ip *installationPace) sent(key string) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if ip.inflight[key]--; ip.inflight[key] <= 0 {
		delete(ip.inflight, key)
	}
	ip.pumpLocked()
}

// hold makes every request of the installation wait until t (a rate-limit
// answer).
func (ip *installationPace) hold(t time.Time) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if t.After(ip.until) {
		ip.until = t
	}
	ip.pumpLocked()
}

// held is how long a read waits for a rate-limit answer's end.
func (ip *installationPace) held() time.Duration {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return ip.until.Sub(ip.p.clock.Now())
}

// turn waits for a write's turn. A progress update that cannot go at once
// is handed to the pacer (queued true): it sends it when its turn comes,
// and the caller goes on.
func (ip *installationPace) turn(ctx context.Context, req *http.Request, next http.RoundTripper) (queued bool, err error) {
	class := hub.WriteClassOf(ctx)
	w := &pendingWrite{class: class, key: req.Method + " " + req.URL.Path}
	ip.mu.Lock()
	ip.enqueueLocked(w)
	if w.state == writeGranted {
		ip.mu.Unlock()
		return false, nil
	}
	if class == hub.WriteProgress {
		defer ip.mu.Unlock()
		owned, err := ownRequest(req, next)
		if err != nil || !ip.p.owned.add() {
			ip.queue = slices.DeleteFunc(ip.queue, func(q *pendingWrite) bool { return q == w })
			ip.p.delayed.WithLabelValues("deferred").Inc()
			return false, hub.ErrWriteDeferred
		}
		w.owned = owned
		ip.p.delayed.WithLabelValues("deferred").Inc()
		return true, nil
	}
	ip.mu.Unlock()
	select {
	case <-w.granted:
		return false, nil
	case <-ctx.Done():
		ip.mu.Lock()
		defer ip.mu.Unlock()
		if w.state == writeQueued {
			ip.queue = slices.DeleteFunc(ip.queue, func(q *pendingWrite) bool { return q == w })
			return false, ctx.Err()
		}
		// Granted as the caller gave up: its turn is spent, and its key
		// is free again.
		if ip.inflight[w.key]--; ip.inflight[w.key] <= 0 {
			delete(ip.inflight, w.key)
		}
		ip.pumpLocked()
		return false, ctx.Err()
	}
}

// ownedSendTimeout bounds one progress update the pacer sends itself.
const ownedSendTimeout = 30 * time.Second

// ownRequest copies req so that the pacer can send it after its caller has
// gone on: the body read once, and the caller's context without its end
// (the caller's logger stays in it).
func ownRequest(req *http.Request, next http.RoundTripper) (*ownedWrite, error) {
	own := req.Clone(context.WithoutCancel(req.Context()))
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, errNoBody
		}
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		own.Body = b
	}
	return &ownedWrite{req: own, next: next}, nil
}

// sendOwned sends a progress update the pacer kept. One that meets a
// rate-limit answer holds the installation and is dropped: a newer update
// or the run's last state replaces it.
func (ip *installationPace) sendOwned(w *pendingWrite) {
	defer ip.p.owned.done()
	ctx, cancel := context.WithTimeout(w.owned.req.Context(), ownedSendTimeout)
	defer cancel()
	resp, err := w.owned.next.RoundTrip(w.owned.req.WithContext(ctx))
	if err == nil {
		if reason, wait := rateLimited(resp, ip.p.clock.Now()); reason != "" {
			ip.p.delayed.WithLabelValues(reason).Inc()
			ip.hold(ip.p.clock.Now().Add(min(wait, maxRateLimitWait)))
		} else if resp.StatusCode >= 300 {
			ip.p.log(ctx).Warn().Int("status", resp.StatusCode).Str("request", w.key).Msg("a progress update the pacer sent later was refused")
		}
		drain(resp)
	} else {
		ip.p.log(ctx).Warn().Err(err).Str("request", w.key).Msg("a progress update the pacer sent later failed")
	}
	ip.sent(w.key)
}

// withdrawOwned drops the progress updates still waiting (the pacer stops).
func (ip *installationPace) withdrawOwned() int {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	n := 0
	ip.queue = slices.DeleteFunc(ip.queue, func(q *pendingWrite) bool {
		if q.owned == nil {
			return false
		}
		n++
		ip.dropLocked(q, "withdrawn")
		return true
	})
	return n
}

// ownedCount counts the progress updates the pacer holds (queued or on
// their way), so that closing it can wait for them; once it closes it
// holds no more.
type ownedCount struct {
	mu      sync.Mutex
	n       int
	closing bool
	zero    chan struct{}
}

func (o *ownedCount) add() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	o.n++
	return true
}

func (o *ownedCount) done() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n--; o.n == 0 && o.zero != nil {
		close(o.zero)
		o.zero = nil
	}
}

// held is how many updates the pacer holds.
func (o *ownedCount) held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// close refuses new updates and returns a channel closed once none is held.
func (o *ownedCount) close() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closing = true
	z := make(chan struct{})
	if o.n == 0 {
		close(z)
	} else {
		o.zero = z
	}
	return z
}
