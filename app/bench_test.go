package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/loadtest"
)

// intakePayload is the recorded issue_comment payload (14,643 bytes from
// @octokit/webhooks-examples) that commandComment turns into a command.
const intakePayload = "issue_comment.created.json"

// BenchmarkWebhook measures one delivery through the bot's real HTTP handler
// (Server.Handler, in-process: no sockets, so the figure is the handler's
// own cost) from the signature check to the answer (202 for the events the
// pre-filter drops, 200 after the enqueue for the others), with the
// default queue and workers and info-level JSON logs written to a file as in
// production. The deliveries are the load test's mix (loadmix_test.go):
// none calls GitHub, so nothing floods the fake.
//
// The queue's workers would otherwise parse each payload on the second core
// while the next one is being taken in, and the benchmark would measure
// them. So the workers are held, all of them, on a GitHub API that does not
// answer, while a batch of deliveries fills at most 4/5 of the queue; the
// timer stops while they are released, the queue drains and they are held
// again.
//
// The floor (a bare handler reading the body and checking the HMAC, the
// same as BenchmarkWebhookFloor) runs the same number of deliveries,
// interleaved batch by batch so that load from other processes on a shared
// machine hits both alike. x-floor is ns/op over floor-ns/op; x-floor-median
// the median of the batches' ratios. On a busy machine, fix the count
// (-benchtime=20000x) so that a stall while testing.B sizes the run cannot
// shrink it to a handful of deliveries.
func BenchmarkWebhook(b *testing.B) {
	b.ReportAllocs()
	gh := newStallingGitHub(b)
	logFile, err := os.Create(filepath.Join(b.TempDir(), "bot.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	srv := newIntakeServer(b, gh.URL(), nil, logFile)
	bot := srv.Handler()
	floor := loadtest.Floor([]byte(testSecret))
	mix, _ := loadMessages(b)
	toBot, toFloor := newMixDeliveries(b, "bench-", mix), newMixDeliveries(b, "floor-", mix)
	stalls := newDeliveries(b, "stall-", commandComment(b, "/plan"))

	w := &ackWriter{h: http.Header{}}
	serve := func(h http.Handler, d *deliveries) {
		w.reset()
		h.ServeHTTP(w, d.next())
		if w.code != http.StatusOK && w.code != http.StatusAccepted {
			b.Fatalf("delivery %s answered %d %q, want 200 or 202", d.last(), w.code, w.body.String())
		}
	}
	holdWorkers := func() {
		gh.hold()
		for range DefaultWorkers {
			serve(bot, stalls)
		}
		// Busy is not enough: a worker is busy from the moment it starts
		// parsing. Held at GitHub, it no longer uses the CPU.
		gh.waitHeld(b, DefaultWorkers)
		waitIntake(b, srv, 0, DefaultWorkers)
	}
	releaseWorkers := func() {
		gh.release()
		waitIntake(b, srv, 0, 0)
	}
	var m batchMeter
	measureFloor := func(n int) {
		m.startFloor()
		for range n {
			serve(floor, toFloor)
		}
		m.stopFloor(n)
	}

	batch := DefaultQueueSize * 4 / 5
	inBatch := 0
	holdWorkers()
	m.startBot()
	for b.Loop() {
		serve(bot, toBot)
		if inBatch++; inBatch == batch {
			m.stopBot()
			b.StopTimer()
			releaseWorkers()
			measureFloor(inBatch)
			holdWorkers()
			inBatch = 0
			b.StartTimer()
			m.startBot()
		}
	}
	m.stopBot()
	releaseWorkers()
	if inBatch > 0 {
		measureFloor(inBatch)
	}
	if m.n != b.N {
		b.Fatalf("floor ran %d deliveries, the bot %d", m.n, b.N)
	}
	floorNs := float64(m.floorElapsed.Nanoseconds()) / float64(m.n)
	b.ReportMetric(floorNs, "floor-ns/op")
	b.ReportMetric(float64(m.floorMallocs)/float64(m.n), "floor-allocs/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/floorNs, "x-floor")
	b.ReportMetric(m.medianRatio(), "x-floor-median")
}

// batchMeter times the bot's and the floor's batches on its own clock and
// counts the floor's allocations the way testing.B does. The median of the
// per-batch time ratios (x-floor-median) shrugs off a batch that another
// process on a shared machine stalled; the ratio of totals (x-floor) does
// not.
type batchMeter struct {
	n            int
	floorElapsed time.Duration
	floorMallocs uint64
	ratios       []float64

	t0  time.Time
	bot time.Duration
	ms  runtime.MemStats
}

func (m *batchMeter) startBot() { m.t0 = time.Now() }
func (m *batchMeter) stopBot()  { m.bot = time.Since(m.t0) }

func (m *batchMeter) startFloor() {
	runtime.ReadMemStats(&m.ms)
	m.floorMallocs -= m.ms.Mallocs
	m.t0 = time.Now()
}

func (m *batchMeter) stopFloor(n int) {
	d := time.Since(m.t0)
	runtime.ReadMemStats(&m.ms)
	m.floorMallocs += m.ms.Mallocs
	m.floorElapsed += d
	m.n += n
	m.ratios = append(m.ratios, float64(m.bot)/float64(d))
}

func (m *batchMeter) medianRatio() float64 {
	r := slices.Clone(m.ratios)
	slices.Sort(r)
	if len(r)%2 == 1 {
		return r[len(r)/2]
	}
	return (r[len(r)/2-1] + r[len(r)/2]) / 2
}

// BenchmarkWebhookFloor is the least any webhook endpoint does per delivery:
// read the body and check its HMAC, on the same payload and requests as
// BenchmarkWebhook.
func BenchmarkWebhookFloor(b *testing.B) {
	b.ReportAllocs()
	floor := loadtest.Floor([]byte(testSecret))
	mix, _ := loadMessages(b)
	d := newMixDeliveries(b, "floor-", mix)
	w := &ackWriter{h: http.Header{}}
	for b.Loop() {
		w.reset()
		floor.ServeHTTP(w, d.next())
		if w.code != http.StatusOK {
			b.Fatalf("floor answered %d", w.code)
		}
	}
}

// deliveries builds signed webhook requests of one payload, each with its
// own delivery id (the bot drops a delivery id it has already queued). The
// bot and the floor get requests built the same way, so request building
// costs them alike.
type deliveries struct {
	url    *url.URL
	msgs   []loadtest.Message
	prefix string
	n      int
}

// newDeliveries is deliveries of one issue_comment payload.
func newDeliveries(tb testing.TB, prefix string, body []byte) *deliveries {
	tb.Helper()
	return newMixDeliveries(tb, prefix, []loadtest.Message{{Body: body, Header: map[string]string{
		"X-GitHub-Event": "issue_comment", loadtest.SignatureHeader: loadtest.Sign(body, []byte(testSecret)),
	}}})
}

// newMixDeliveries sends msgs (bodies with their event and signature
// headers) in turn.
func newMixDeliveries(tb testing.TB, prefix string, msgs []loadtest.Message) *deliveries {
	tb.Helper()
	u, err := url.Parse("http://bot.test" + WebhookPath)
	if err != nil {
		tb.Fatal(err)
	}
	return &deliveries{url: u, msgs: msgs, prefix: prefix}
}

func (d *deliveries) next() *http.Request {
	m := d.msgs[d.n%len(d.msgs)]
	d.n++
	h := http.Header{"Content-Type": {"application/json"}, "X-Github-Delivery": {d.prefix + strconv.Itoa(d.n)}}
	for k, v := range m.Header {
		h.Set(k, v)
	}
	return &http.Request{
		Method: http.MethodPost, URL: d.url, Host: d.url.Host, RequestURI: d.url.Path,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(bytes.NewReader(m.Body)), ContentLength: int64(len(m.Body)),
	}
}

func (d *deliveries) last() string { return d.prefix + strconv.Itoa(d.n) }

// ackWriter is a reusable http.ResponseWriter that keeps the status and the
// start of the body (for error messages).
type ackWriter struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (w *ackWriter) Header() http.Header { return w.h }

func (w *ackWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *ackWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len() < 512 {
		w.body.Write(p)
	}
	return len(p), nil
}

func (w *ackWriter) reset() {
	clear(w.h)
	w.code = 0
	w.body.Reset()
}

// newIntakeServer is the real bot with the in-memory backend, its GitHub
// API at githubURL, default settings but for env, logging JSON at info
// level to logs.
func newIntakeServer(tb testing.TB, githubURL string, env map[string]string, logs io.Writer) *Server {
	tb.Helper()
	vars := map[string]string{
		"GITHUB_V3_API_URL": githubURL, "GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": testSecret,
		"GITHUB_APP_PRIVATE_KEY": testKey, "SANDBOX_BACKEND": "process",
		"SANDBOX_DATA_DIR": tb.TempDir(),
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := NewServer(cfg, backendtest.NewMemory(), zerolog.New(logs).Level(zerolog.InfoLevel))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Stop)
	return srv
}

// waitIntake waits until the bot's queue holds queued deliveries and busy
// workers are running handlers.
func waitIntake(tb testing.TB, s *Server, queued, busy int64) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		q, w := s.gauge(githubapp.MetricsKeyQueueLength), s.gauge(githubapp.MetricsKeyActiveWorkers)
		if q == queued && w == busy {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("webhook queue: %d queued and %d workers busy after 20s, want %d and %d", q, w, queued, busy)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// metricValue reads one sample (name with its labels, as /metrics prints
// it) from the bot's /metrics; a sample /metrics lacks is a test failure.
func metricValue(tb testing.TB, s *Server, sample string) float64 {
	tb.Helper()
	rec := httptest.NewRecorder()
	s.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("/metrics answered %d", rec.Code)
	}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("/metrics %s: %q is not a number", sample, v)
			}
			return f
		}
	}
	tb.Fatalf("/metrics has no sample %s", sample)
	return 0
}

// metricSum adds up every sample of one metric (all label values) on the
// bot's /metrics.
func metricSum(tb testing.TB, s *Server, name string) float64 {
	tb.Helper()
	rec := httptest.NewRecorder()
	s.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sum := 0.0
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			tb.Fatalf("/metrics: %q: %v", line, err)
		}
		sum += f
	}
	return sum
}

// readPayload reads a recorded payload verbatim: githubtest.Payload would
// replace its repository object and shrink it by a third.
func readPayload(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("githubtest", "payloads", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// commandComment is the recorded issue_comment payload with body as the
// comment and an installation, so the bot acts on it: it asks GitHub for
// the sender's permission first.
func commandComment(tb testing.TB, body string) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(readPayload(tb, intakePayload), &m); err != nil {
		tb.Fatal(err)
	}
	m["comment"].(map[string]any)["body"] = body
	m["installation"] = map[string]any{"id": testInstallation}
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// stallingGitHub is a GitHub API that mints installation tokens at once and
// holds every other request until released, then answers 503. A worker
// whose handler calls it stays busy, as it would while GitHub hangs: that
// is how the benchmark keeps the workers off the CPU and how the load test
// fills a small queue.
type stallingGitHub struct {
	srv     *httptest.Server
	mu      sync.Mutex
	gate    chan struct{}
	waiting int
}

// newStallingGitHub starts one, released; it is closed when the test ends.
func newStallingGitHub(tb testing.TB) *stallingGitHub {
	g := &stallingGitHub{gate: make(chan struct{})}
	close(g.gate)
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	tb.Cleanup(func() {
		g.release()
		g.srv.Close()
	})
	return g
}

func (g *stallingGitHub) URL() string { return g.srv.URL + "/" }

func (g *stallingGitHub) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	// Tokens come at once: ghinstallation mints them under a lock, and
	// workers queued on that lock could not be told from workers still
	// parsing. Past it, each worker holds its own request here.
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/access_tokens") {
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"token": "ghs_stalling", "expires_at": time.Now().Add(time.Hour)})
		return
	}
	g.mu.Lock()
	gate := g.gate
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	select {
	case <-gate:
	case <-r.Context().Done():
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `{"message":"test GitHub: stalled on purpose, now released"}`)
}

// hold makes requests from now on wait until release.
func (g *stallingGitHub) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gate:
		g.gate = make(chan struct{})
	default: // already holding
	}
}

// release answers the held requests and those that come until the next hold.
func (g *stallingGitHub) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

// waitHeld waits until n requests are being held.
func (g *stallingGitHub) waitHeld(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		g.mu.Lock()
		held := g.waiting
		g.mu.Unlock()
		if held == n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("stalling GitHub holds %d requests after 20s, want %d", held, n)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// drainServer waits for the bot's queue and workers to be idle.
func drainServer(tb testing.TB, s *Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		tb.Fatal(err)
	}
}
