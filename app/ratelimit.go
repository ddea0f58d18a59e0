package app

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
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
//
// Writes waiting for the pace go by class (hub.WriteClass), not in
// the order they came: a run's result before everything else, the
// bookkeeping of a posted result (labels, the progress's last state)
// after the other writes, progress updates last and only while the bucket
// is more than half full. A progress update that cannot go at once is
// kept and sent later, and a newer write of the same comment or check run
// replaces it: a burst of runs ending together posts its results first,
// at the same pace.
type githubPacer struct {
	perMinute float64
	clock     paceClock
	logger    zerolog.Logger
	owned     ownedCount

	mu   sync.Mutex
	inst map[int64]*installationPace

	delayed *prometheus.CounterVec
	waited  *prometheus.HistogramVec
}

func newGitHubPacer(perMinute float64, reg prometheus.Registerer, clock paceClock, logger zerolog.Logger) *githubPacer {
	p := &githubPacer{
		perMinute: perMinute,
		clock:     clock,
		logger:    logger,
		inst:      map[int64]*installationPace{},
		delayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_bot_github_requests_delayed_total",
			Help: "GitHub requests the bot held back, by reason (pace: a write waited for its turn; deferred: a progress update kept to be sent later; superseded: a kept progress update a newer write of its comment or check run replaced; withdrawn: one still kept when the bot stopped; secondary, primary: waiting out a rate-limit answer).",
		}, []string{"reason"}),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandbox_bot_github_wait_seconds",
			Help:    "Time a delayed GitHub request waited, by reason (pace; limit: a rate-limit answer).",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 60, 300, 900},
		}, []string{"reason"}),
	}
	for _, r := range []string{"pace", "deferred", "superseded", "withdrawn", "secondary", "primary"} {
		p.delayed.WithLabelValues(r)
	}
	reg.MustRegister(p.delayed, p.waited)
	return p
}

// log is the request's logger (the run's, with its task id), else the
// pacer's.
func (p *githubPacer) log(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &p.logger
}

var errNoBody = errors.New("the request body cannot be read a second time")

// drain reads what is left of a response and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
}

func (p *githubPacer) installation(id int64) *installationPace {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip := p.inst[id]
	if ip == nil {
		ip = newInstallationPace(p)
		p.inst[id] = ip
	}
	return ip
}

// close waits until the progress updates the pacer kept are sent, or ctx
// ends; those still waiting then are dropped and counted in the error.
// Results and labels are not the pacer's: their callers wait for them and
// keep what was not sent.
func (p *githubPacer) close(ctx context.Context) error {
	select {
	case <-p.owned.close():
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	insts := make([]*installationPace, 0, len(p.inst))
	for _, ip := range p.inst {
		insts = append(insts, ip)
	}
	p.mu.Unlock()
	n := 0
	for _, ip := range insts {
		n += ip.withdrawOwned()
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("stopping: %d progress updates still waiting for GitHub's pace were not sent (the runs' results are not among them)", n)
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
		queued, err := t.waitTurn(ctx, req)
		if queued {
			return nil, hub.ErrWriteQueued
		}
		if err != nil {
			return nil, err
		}
		if attempt > 0 && req.Body != nil {
			if req.GetBody == nil {
				t.ended(req)
				return nil, fmt.Errorf("retry %s %s after a rate limit: %w", req.Method, req.URL.Path, errNoBody)
			}
			body, err := req.GetBody()
			if err != nil {
				t.ended(req)
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
		resp, err := t.next.RoundTrip(req)
		t.ended(req)
		if err != nil {
			return resp, err
		}
		now := t.p.clock.Now()
		reason, wait := rateLimited(resp, now)
		if reason == "" || wait > maxRateLimitWait || attempt >= 5 {
			return resp, nil
		}
		if dl, ok := ctx.Deadline(); ok && now.Add(wait).After(dl) {
			return resp, nil // the caller cannot wait that long: let it fail and retry later
		}
		drain(resp)
		t.ip.hold(now.Add(wait))
		t.p.delayed.WithLabelValues(reason).Inc()
	}
}

// ended frees a write's key once GitHub answered it.
func (t *pacedTransport) ended(req *http.Request) {
	if isWrite(req.Method) {
		t.ip.sent(req.Method + " " + req.URL.Path)
	}
}

// waitTurn waits out the installation's rate-limit answer (a read), or
// for the write's turn in the pace; a progress update that cannot go at
// once is kept by the pacer (queued).
func (t *pacedTransport) waitTurn(ctx context.Context, req *http.Request) (queued bool, err error) {
	if isWrite(req.Method) {
		return t.ip.turn(ctx, req, t.next)
	}
	if d := t.ip.held(); d > 0 {
		if err := sleepOn(ctx, t.p.clock, d); err != nil {
			return false, err
		}
		t.p.waited.WithLabelValues("limit").Observe(d.Seconds())
	}
	return false, nil
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
