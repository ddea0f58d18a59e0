package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// GitHub's limits, as documented: about 80 content-creating requests a
// minute per installation (secondary), and when told to wait without a
// Retry-After, at least a minute.
const (
	DefaultGitHubWritesPerMinute = 60
	// githubContentLimit is GitHub's documented secondary limit of
	// content-generating requests a minute: the bucket's burst is what it
	// leaves above the pace, so no minute holds more than it.
	githubContentLimit        = 80
	minGitHubWriteBurst       = 5
	secondaryLimitDefaultWait = time.Minute
	// maxRateLimitWait bounds one wait; past it the response goes back to
	// the caller (a result then stays with its run and is posted later).
	maxRateLimitWait = 15 * time.Minute
)

// githubPacer keeps the bot below GitHub's rate limits, per installation:
// writes (POST, PATCH, PUT, DELETE) are paced by a token bucket below the
// secondary limit, and a rate-limit answer (secondary: 403/429 with
// GitHub's message; primary: x-ratelimit-remaining 0) makes every request
// of that installation wait until Retry-After or the reset, then the
// request is sent again. go-github alone would refuse every request
// client-side until then and the bot would drop what failed.
type githubPacer struct {
	perMinute float64

	mu    sync.Mutex
	inst  map[int64]*installationPace
	sleep func(ctx context.Context, d time.Duration) error

	delayed *prometheus.CounterVec
	waited  *prometheus.HistogramVec
}

type installationPace struct {
	writes *rate.Limiter
	mu     sync.Mutex
	until  time.Time // no request before this (a rate limit answer)
}

func newGitHubPacer(perMinute float64, reg prometheus.Registerer) *githubPacer {
	p := &githubPacer{
		perMinute: perMinute,
		inst:      map[int64]*installationPace{},
		sleep:     sleepCtx,
		delayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_bot_github_requests_delayed_total",
			Help: "GitHub requests the bot held back, by reason (pace: writes paced below the secondary limit; deferred: progress updates not sent while the pace had little room; secondary, primary: waiting out a rate-limit answer).",
		}, []string{"reason"}),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandbox_bot_github_wait_seconds",
			Help:    "Time a delayed GitHub request waited, by reason (pace; limit: a rate-limit answer).",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 60, 300, 900},
		}, []string{"reason"}),
	}
	for _, r := range []string{"pace", "deferred", "secondary", "primary"} {
		p.delayed.WithLabelValues(r)
	}
	reg.MustRegister(p.delayed, p.waited)
	return p
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *githubPacer) installation(id int64) *installationPace {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip := p.inst[id]
	if ip == nil {
		ip = &installationPace{writes: rate.NewLimiter(rate.Limit(p.perMinute/60), writeBurst(p.perMinute))}
		p.inst[id] = ip
	}
	return ip
}

// writeBurst is the bucket's size at a pace of perMinute writes: GitHub's
// 80 a minute less the pace (a full bucket and a minute of pace stay within
// it), and at least 5.
func writeBurst(perMinute float64) int {
	return max(minGitHubWriteBurst, githubContentLimit-int(perMinute))
}

// creator wraps a client creator so every installation client is paced.
func (p *githubPacer) creator(cc githubapp.ClientCreator) githubapp.ClientCreator {
	return &pacedCreator{ClientCreator: cc, p: p}
}

type pacedCreator struct {
	githubapp.ClientCreator
	p *githubPacer
}

func (c *pacedCreator) NewInstallationClient(id int64) (*github.Client, error) {
	client, err := c.ClientCreator.NewInstallationClient(id)
	if err != nil {
		return nil, err
	}
	// Client() is a copy of the client's *http.Client: the paced one goes
	// into a new go-github client with the same addresses and agent.
	hc := client.Client()
	hc.Transport = &pacedTransport{next: hc.Transport, p: c.p, ip: c.p.installation(id)}
	paced := github.NewClient(hc)
	paced.BaseURL, paced.UploadURL, paced.UserAgent = client.BaseURL, client.UploadURL, client.UserAgent
	return paced, nil
}

type pacedTransport struct {
	next http.RoundTripper
	p    *githubPacer
	ip   *installationPace
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func (t *pacedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		if err := t.waitTurn(ctx, req.Method); err != nil {
			return nil, err
		}
		if attempt > 0 && req.Body != nil {
			if req.GetBody == nil {
				return nil, fmt.Errorf("retry %s %s after a rate limit: the request body cannot be sent again", req.Method, req.URL.Path)
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		reason, wait := rateLimited(resp, time.Now())
		if reason == "" || wait > maxRateLimitWait || attempt >= 5 {
			return resp, nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
			return resp, nil // the caller cannot wait that long: let it fail and retry later
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		t.ip.mu.Lock()
		if u := time.Now().Add(wait); u.After(t.ip.until) {
			t.ip.until = u
		}
		t.ip.mu.Unlock()
		t.p.delayed.WithLabelValues(reason).Inc()
	}
}

// waitTurn waits out the installation's rate-limit answer, then, for a
// write, its place in the pace.
func (t *pacedTransport) waitTurn(ctx context.Context, method string) error {
	t.ip.mu.Lock()
	until := t.ip.until
	t.ip.mu.Unlock()
	if d := time.Until(until); d > 0 {
		start := time.Now()
		if err := t.p.sleep(ctx, d); err != nil {
			return err
		}
		t.p.waited.WithLabelValues("limit").Observe(time.Since(start).Seconds())
	}
	if !isWrite(method) {
		return nil
	}
	// A progress update (handlers.Deferrable) waits for no turn: it goes
	// only while the bucket is more than half full, and the room below is
	// kept for results, labels and replies.
	if handlers.IsDeferrable(ctx) {
		if t.ip.writes.Tokens() < float64(t.ip.writes.Burst())/2+1 || !t.ip.writes.Allow() {
			t.p.delayed.WithLabelValues("deferred").Inc()
			return handlers.ErrWriteDeferred
		}
		return nil
	}
	r := t.ip.writes.Reserve()
	if d := r.Delay(); d > 0 {
		t.p.delayed.WithLabelValues("pace").Inc()
		if err := t.p.sleep(ctx, d); err != nil {
			r.Cancel()
			return err
		}
		t.p.waited.WithLabelValues("pace").Observe(d.Seconds())
	}
	return nil
}

// rateLimited reads a response as GitHub documents its limits and says
// which one it is and how long to wait; "" when it is not one.
func rateLimited(resp *http.Response, now time.Time) (string, time.Duration) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return "", 0
	}
	retryAfter := func() (time.Duration, bool) {
		s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
		return time.Duration(s) * time.Second, err == nil && s >= 0
	}
	reset := func() (time.Duration, bool) {
		s, err := strconv.ParseInt(strings.TrimSpace(resp.Header.Get("X-RateLimit-Reset")), 10, 64)
		return time.Unix(s, 0).Sub(now) + time.Second, err == nil
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if d, ok := retryAfter(); ok {
			return "primary", d
		}
		if d, ok := reset(); ok {
			return "primary", max(d, 0)
		}
		return "", 0
	}
	// A secondary limit is told apart from a plain 403 by its message.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	var msg struct {
		Message string `json:"message"`
		DocURL  string `json:"documentation_url"`
	}
	_ = json.Unmarshal(body, &msg)
	if !strings.Contains(strings.ToLower(msg.Message), "secondary rate limit") && !strings.Contains(msg.DocURL, "secondary-rate-limits") {
		return "", 0
	}
	if d, ok := retryAfter(); ok {
		return "secondary", d
	}
	if d, ok := reset(); ok && d > 0 {
		return "secondary", d
	}
	return "secondary", secondaryLimitDefaultWait
}
