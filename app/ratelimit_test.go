package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// Each kind of limit answer is waited out for as long as GitHub says, and
// the write is sent again with its body; a plain 403 is not a limit.
func TestPacedTransportWaitsOutLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		first  func(w http.ResponseWriter)
		reason string
		wait   time.Duration // at least
		tries  int
	}{
		{"secondary with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
		}, "secondary", 7 * time.Second, 2},
		{"secondary without Retry-After", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"message":"x","documentation_url":"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
		}, "secondary", time.Minute, 2},
		{"primary until the reset", func(w http.ResponseWriter) {
			w.Header().Set("X-RateLimit-Remaining", "0")
			// The reset is 90 s after the answer, whenever it is sent.
			w.Header().Set("X-RateLimit-Reset", fmt.Sprint(time.Now().Add(90*time.Second).Unix()))
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"API rate limit exceeded for installation ID 42."}`)
		}, "primary", 80 * time.Second, 2},
		{"a plain 403", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"Resource not accessible by integration"}`)
		}, "", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				n := len(bodies)
				mu.Unlock()
				if n == 1 {
					tc.first(w)
					return
				}
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"id":1}`)
			}))
			defer srv.Close()
			p, clock, client := pacedClient(t, srv.URL)
			start := clock.Now()
			var err error
			clock.drive(func() {
				_, _, err = client.Issues.CreateComment(context.Background(), "o", "r", 1, &github.IssueComment{Body: github.String("hello")})
			})
			waited := clock.Now().Sub(start)
			if len(bodies) != tc.tries {
				t.Fatalf("%d requests, want %d", len(bodies), tc.tries)
			}
			if tc.reason == "" {
				if err == nil || !strings.Contains(err.Error(), "not accessible") {
					t.Fatalf("a plain 403 must reach the caller, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("after waiting: %v", err)
			}
			if bodies[1] != bodies[0] || !strings.Contains(bodies[1], "hello") {
				t.Errorf("retried body %q, first %q", bodies[1], bodies[0])
			}
			if waited < tc.wait-2*time.Second {
				t.Errorf("waited %v, want about %v", waited, tc.wait)
			}
			if got := testutil.ToFloat64(p.delayed.WithLabelValues(tc.reason)); got != 1 {
				t.Errorf("delayed{reason=%s} = %v, want 1", tc.reason, got)
			}
		})
	}
}

// Writes of one installation are paced; reads and other installations are
// not held back by them.
func TestPacerPacesWritesPerInstallation(t *testing.T) {
	t.Parallel()
	srv := newRecorder(t)
	_, clock, one := pacedClient(t, srv.URL)
	two := srv.client(t, one, 2)
	start := clock.Now()
	for i := range writeBurst(60) {
		if err := srv.comment(one, i, hub.WriteNormal); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := one.Issues.Get(context.Background(), "o", "r", 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.comment(two, 1, hub.WriteNormal); err != nil {
		t.Fatal(err)
	}
	if d := clock.Now().Sub(start); d != 0 {
		t.Fatalf("the burst of %d writes, a read or another installation's write waited %v", writeBurst(60), d)
	}
	clock.drive(func() { srv.comment(one, 99, hub.WriteNormal) })
	if d := clock.Now().Sub(start); d < 900*time.Millisecond || d > 1100*time.Millisecond {
		t.Fatalf("the write past the burst at 60/min waited %v, want about 1s", d)
	}
}

// A progress update (handlers.Deferrable) is sent at once while the bucket
// is more than half full; below, the pacer keeps it (handlers.ErrWriteQueued
// through go-github) and the caller waits for nothing; the room below is
// kept for results, which still get their turn at once.
func TestPacerKeepsProgressWhenThePaceIsLow(t *testing.T) {
	t.Parallel()
	srv := newRecorder(t)
	p, clock, client := pacedClient(t, srv.URL)
	burst := writeBurst(60)
	if burst != 20 {
		t.Fatalf("the burst at 60 writes a minute is %d, want 20 (GitHub's 80 less the pace)", burst)
	}
	sent := 0
	for i := range burst {
		if err := srv.edit(client, int64(i), "step", hub.WriteProgress); err == nil {
			sent++
		} else if !errors.Is(err, hub.ErrWriteQueued) {
			t.Fatalf("a progress edit kept by the pacer: %v, want ErrWriteQueued", err)
		}
	}
	if sent < burst/2-1 || sent > burst/2 {
		t.Fatalf("%d progress edits were sent from a full bucket of %d, want about half", sent, burst)
	}
	if got := srv.count(); got != sent {
		t.Fatalf("GitHub got %d requests for %d sent", got, sent)
	}
	start := clock.Now()
	for i := range burst - sent {
		if err := srv.comment(client, i, hub.WriteResult); err != nil {
			t.Fatal(err)
		}
	}
	if d := clock.Now().Sub(start); d != 0 {
		t.Fatalf("the results behind the progress edits waited %v", d)
	}
	if d := testutil.ToFloat64(p.delayed.WithLabelValues("deferred")); d != float64(burst-sent) {
		t.Fatalf("delayed{reason=deferred} = %v, want %d", d, burst-sent)
	}
	// The kept edits go once the bucket is above half again, and nothing
	// of them is lost.
	closed := make(chan error, 1)
	go func() { closed <- p.close(context.Background()) }()
	clock.driveUntil(closed)
	if got := srv.count(); got != 2*burst-sent {
		t.Fatalf("GitHub got %d requests, want %d (every kept edit sent)", got, 2*burst-sent)
	}
}

// Results overtake the writes waiting before them: a run's result goes
// first, then the other writes, then a result's bookkeeping (labels), then
// the progress edits the pacer kept, at the same pace.
func TestPacerSendsResultsFirst(t *testing.T) {
	t.Parallel()
	srv := newRecorder(t)
	p, clock, client := pacedClient(t, srv.URL)
	ip := p.installation(42)
	srv.spend(client)
	if err := srv.edit(client, 7, "progress", hub.WriteProgress); !errors.Is(err, hub.ErrWriteQueued) {
		t.Fatalf("a progress edit on an empty bucket: %v, want ErrWriteQueued", err)
	}
	var wg sync.WaitGroup
	queue := func(what string, write func() error) {
		wg.Add(1)
		n := ip.waiting()
		go func() {
			defer wg.Done()
			if err := write(); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}()
		waitFor(t, what+" queued", func() bool { return ip.waiting() == n+1 })
	}
	queue("label", func() error {
		ctx := hub.WithWriteClass(context.Background(), hub.WriteAfterResult)
		_, _, err := client.Issues.AddLabelsToIssue(ctx, "o", "r", 3, []string{"agent:awaiting-approval"})
		return err
	})
	queue("reply", func() error { return srv.comment(client, 4, hub.WriteNormal) })
	queue("plan", func() error { return srv.comment(client, 3, hub.WriteResult) })
	for want := 1; want <= 3; want++ {
		clock.Advance(time.Second)
		waitFor(t, fmt.Sprintf("write %d sent", want), func() bool { return srv.count() == want })
	}
	wg.Wait()
	clock.Advance(11 * time.Second) // the bucket back above half
	waitFor(t, "the kept progress edit sent", func() bool { return srv.count() == 4 })
	want := []string{"POST /repos/o/r/issues/3/comments", "POST /repos/o/r/issues/4/comments", "POST /repos/o/r/issues/3/labels", "PATCH /repos/o/r/issues/comments/7"}
	if got := srv.order(); !slices.Equal(got, want) {
		t.Fatalf("GitHub got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A progress edit the pacer keeps is replaced by a newer write of the same
// comment: only the latest is sent, the progress comment's last state
// included; other comments' edits are not touched.
func TestPacerDropsSupersededProgress(t *testing.T) {
	t.Parallel()
	srv := newRecorder(t)
	p, clock, client := pacedClient(t, srv.URL)
	srv.spend(client)
	for _, e := range []struct {
		id   int64
		body string
	}{{7, "step 1"}, {8, "other 1"}, {7, "step 2"}, {7, "step 3"}} {
		if err := srv.edit(client, e.id, e.body, hub.WriteProgress); !errors.Is(err, hub.ErrWriteQueued) {
			t.Fatalf("edit %q: %v, want ErrWriteQueued", e.body, err)
		}
	}
	// A write in between, then the last state of comment 8, each sent
	// when its second comes.
	ip := p.installation(42)
	superseded := func() float64 { return testutil.ToFloat64(p.delayed.WithLabelValues("superseded")) }
	for _, w := range []struct {
		id     int64
		body   string
		class  hub.WriteClass
		queued func() bool
	}{
		{9, "", hub.WriteNormal, func() bool { return ip.waiting() == 3 }},
		// It takes the place of the kept "other 1".
		{8, "other done", hub.WriteAfterResult, func() bool { return superseded() == 3 }},
	} {
		errc := make(chan error, 1)
		go func() { errc <- srv.edit(client, w.id, w.body, w.class) }()
		waitFor(t, fmt.Sprintf("edit of %d queued", w.id), w.queued)
		clock.Advance(time.Second)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- p.close(context.Background()) }()
	clock.driveUntil(closed)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	want := []string{"PATCH /repos/o/r/issues/comments/9 ", "PATCH /repos/o/r/issues/comments/8 other done", "PATCH /repos/o/r/issues/comments/7 step 3"}
	if got := srv.bodies(); !slices.Equal(got, want) {
		t.Fatalf("GitHub got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := superseded(); d != 3 {
		t.Fatalf("delayed{reason=superseded} = %v, want 3", d)
	}
}

// One installation's full pace holds back none of another's writes, nor
// its progress edits.
func TestPacerInstallationsAreIndependent(t *testing.T) {
	t.Parallel()
	srv := newRecorder(t)
	_, clock, one := pacedClient(t, srv.URL)
	two := srv.client(t, one, 2)
	srv.spend(one)
	if err := srv.edit(one, 7, "step", hub.WriteProgress); !errors.Is(err, hub.ErrWriteQueued) {
		t.Fatalf("installation 1's edit: %v, want ErrWriteQueued", err)
	}
	start := clock.Now()
	if err := srv.edit(two, 8, "step", hub.WriteProgress); err != nil {
		t.Fatalf("installation 2's progress edit with a full bucket: %v", err)
	}
	if err := srv.comment(two, 1, hub.WriteResult); err != nil {
		t.Fatal(err)
	}
	if d := clock.Now().Sub(start); d != 0 {
		t.Fatalf("installation 2 waited %v behind installation 1", d)
	}
}

// Stopping sends what the pacer kept, at the pace; what the stop's time
// does not allow is dropped and said (counted, and named in the error),
// and nothing is kept after it. A caller's own write (a result) that
// cannot wait for its turn is returned to it unsent, never dropped.
func TestPacerLosesNothingAtShutdown(t *testing.T) {
	t.Parallel()
	srv := newRecorder(t)
	p, clock, client := pacedClient(t, srv.URL)
	srv.spend(client)
	for id := int64(1); id <= 3; id++ {
		srv.edit(client, id, "step", hub.WriteProgress)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.close(context.Background()) }()
	clock.driveUntil(closed)
	if err := <-closed; err != nil || srv.count() != 3 {
		t.Fatalf("stopping: %v; GitHub got %d of 3 kept edits", err, srv.count())
	}
	if err := srv.edit(client, 4, "late", hub.WriteProgress); !errors.Is(err, hub.ErrWriteDeferred) {
		t.Fatalf("an edit after the stop with no room: %v, want ErrWriteDeferred (not kept)", err)
	}

	q, qclock, qclient := pacedClient(t, srv.URL)
	srv.spend(qclient)
	srv.edit(qclient, 1, "step", hub.WriteProgress)
	srv.edit(qclient, 2, "step", hub.WriteProgress)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		_, _, err := qclient.Issues.CreateComment(hub.WithWriteClass(ctx, hub.WriteResult), "o", "r", 5, &github.IssueComment{Body: github.String("plan")})
		result <- err
	}()
	waitFor(t, "the result queued", func() bool { return q.installation(42).waiting() == 3 })
	cancel() // the bot stops before the result's turn
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("a result whose caller stopped: %v, want its context's end", err)
	}
	err := q.close(ctx)
	if err == nil || !strings.Contains(err.Error(), "2 progress updates") {
		t.Fatalf("stopping with no time left: %v, want the 2 kept edits named", err)
	}
	if d := testutil.ToFloat64(q.delayed.WithLabelValues("withdrawn")); d != 2 || srv.count() != 0 {
		t.Fatalf("delayed{reason=withdrawn} = %v and GitHub got %d, want 2 and 0", d, srv.count())
	}
	qclock.Advance(time.Minute)
	if q.owned.held() != 0 || srv.count() != 0 {
		t.Fatalf("after the stop the pacer holds %d and sent %d", q.owned.held(), srv.count())
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// pacedClient is a go-github client of installation 42 to url through a
// pacer of 60 writes a minute on a clock the test advances.
func pacedClient(t *testing.T, url string) (*githubPacer, *fakeClock, *github.Client) {
	clock := newFakeClock()
	p := newGitHubPacer(60, prometheus.NewRegistry(), clock, zerolog.Nop())
	client := github.NewClient(&http.Client{Transport: &pacedTransport{next: http.DefaultTransport, p: p, ip: p.installation(42)}})
	client.BaseURL = mustURL(t, url+"/")
	return p, clock, client
}

// waiting is how many writes wait for their turn.
func (ip *installationPace) waiting() int {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return len(ip.queue)
}

// waitFor waits for cond (state another goroutine changes), failing after
// 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waiting for %s", what)
		}
	}
}

// fakeClock is a paceClock the test moves: timers fire in Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, tm)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.done
		tm.done = true
		return was
	}
}

// next is the earliest pending timer's time.
func (c *fakeClock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	found := false
	for _, tm := range c.timers {
		if !tm.done && (!found || tm.at.Before(at)) {
			at, found = tm.at, true
		}
	}
	return at, found
}

// Advance moves the clock by d and fires the timers due, earliest first.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due *fakeTimer
		for _, tm := range c.timers {
			if !tm.done && !tm.at.After(end) && (due == nil || tm.at.Before(due.at)) {
				due = tm
			}
		}
		if due == nil {
			c.now = end
			c.timers = slices.DeleteFunc(c.timers, func(tm *fakeTimer) bool { return tm.done })
			c.mu.Unlock()
			return
		}
		due.done = true
		if due.at.After(c.now) {
			c.now = due.at
		}
		c.mu.Unlock()
		due.f()
	}
}

// drive runs f, moving the clock to each timer f waits on until it returns.
func (c *fakeClock) drive(f func()) {
	done := make(chan error, 1)
	go func() { f(); done <- nil }()
	c.driveUntil(done)
	<-done
}

// driveUntil moves the clock to each pending timer until done has a value
// (which it leaves there).
func (c *fakeClock) driveUntil(done chan error) {
	for {
		select {
		case err := <-done:
			done <- err
			return
		default:
		}
		if at, ok := c.next(); ok {
			c.Advance(at.Sub(c.Now()))
			continue
		}
		runtime.Gosched()
	}
}

// recorder is a GitHub that answers every request and notes its method and
// path, and the body of an edit.
type recorder struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var c struct {
			Body string `json:"body"`
		}
		b, _ := io.ReadAll(req.Body)
		json.Unmarshal(b, &c)
		r.mu.Lock()
		r.got = append(r.got, req.Method+" "+req.URL.Path+"\x00"+c.Body)
		r.mu.Unlock()
		if strings.HasSuffix(req.URL.Path, "/labels") {
			io.WriteString(w, `[]`)
			return
		}
		io.WriteString(w, `{"id":1}`)
	}))
	t.Cleanup(r.Close)
	return r
}

// client is a go-github client of another installation through like's
// pacer.
func (r *recorder) client(t *testing.T, like *github.Client, installation int64) *github.Client {
	p := like.Client().Transport.(*pacedTransport).p
	c := github.NewClient(&http.Client{Transport: &pacedTransport{next: http.DefaultTransport, p: p, ip: p.installation(installation)}})
	c.BaseURL = mustURL(t, r.URL+"/")
	return c
}

// spend empties c's bucket with writes, and forgets them.
func (r *recorder) spend(c *github.Client) {
	for i := range writeBurst(60) {
		r.comment(c, i, hub.WriteNormal)
	}
	r.reset()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = nil
}

func (r *recorder) order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, g := range r.got {
		out = append(out, strings.Split(g, "\x00")[0])
	}
	return out
}

func (r *recorder) bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, g := range r.got {
		out = append(out, strings.Replace(g, "\x00", " ", 1))
	}
	return out
}

func (r *recorder) comment(c *github.Client, issue int, class hub.WriteClass) error {
	_, _, err := c.Issues.CreateComment(hub.WithWriteClass(context.Background(), class), "o", "r", issue, &github.IssueComment{Body: github.String("hello")})
	return err
}

func (r *recorder) edit(c *github.Client, id int64, body string, class hub.WriteClass) error {
	_, _, err := c.Issues.EditComment(hub.WithWriteClass(context.Background(), class), "o", "r", id, &github.IssueComment{Body: github.String(body)})
	return err
}
