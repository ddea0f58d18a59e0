package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/loadtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

const (
	queueFullSample   = `sandbox_bot_webhook_rejected_total{reason="queue_full"}`
	acceptedSample    = `sandbox_bot_webhook_deliveries_total{event="issue_comment",status="accepted"}`
	deliveriesName    = `sandbox_bot_webhook_deliveries_total`
	readersSample     = `sandbox_bot_webhook_rejected_total{reason="too_many_readers"}`
	handlerErrSample  = `sandbox_bot_handler_errors_total{event="issue_comment"}`
	droppedEventsName = `sandbox_bot_github_event_dropped_total`
)

// A full queue answers 503 and counts the drop; the dropped delivery is
// taken when GitHub redelivers it once there is room. Workers are held on
// a GitHub that does not answer, so the queue's state is exact, not raced.
func TestQueueFullAnswers503AndIsCounted(t *testing.T) {
	gh := newStallingGitHub(t)
	srv := newIntakeServer(t, gh.URL(), map[string]string{"SANDBOX_QUEUE_SIZE": "3", "SANDBOX_WORKERS": "2"}, io.Discard)
	d := newDeliveries(t, "d-", commandComment(t, "/plan"))
	deliver := func(req *http.Request) int {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code
	}

	gh.hold()
	for i := range 2 {
		if code := deliver(d.next()); code != http.StatusOK {
			t.Fatalf("delivery %d to idle workers answered %d, want 200", i, code)
		}
	}
	gh.waitHeld(t, 2)
	waitIntake(t, srv, 0, 2)
	for i := range 3 {
		if code := deliver(d.next()); code != http.StatusOK {
			t.Fatalf("delivery %d into a queue with room answered %d, want 200", i, code)
		}
	}
	waitIntake(t, srv, 3, 2)
	var dropped []string
	for range 2 {
		req := d.next()
		if code := deliver(req); code != http.StatusServiceUnavailable {
			t.Fatalf("delivery into a full queue answered %d, want 503", code)
		}
		dropped = append(dropped, req.Header.Get("X-Github-Delivery"))
	}
	if got := metricValue(t, srv, queueFullSample); got != 2 {
		t.Errorf("%s = %v, want 2", queueFullSample, got)
	}
	if got := metricValue(t, srv, droppedEventsName); got != 2 {
		t.Errorf("%s = %v, want 2 (go-githubapp's own count)", droppedEventsName, got)
	}
	if got := metricValue(t, srv, acceptedSample); got != 5 {
		t.Errorf("%s = %v, want 5", acceptedSample, got)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if !strings.Contains(rec.Body.String(), `"queued":3,"workers_busy":2`) {
		t.Errorf("/healthz = %s, want 3 queued and 2 busy", rec.Body.String())
	}

	// GitHub answers again (with errors): the queue drains, and the
	// redelivery of a dropped delivery is taken, not treated as a duplicate.
	gh.release()
	waitIntake(t, srv, 0, 0)
	redelivery := d.next()
	redelivery.Header.Set("X-Github-Delivery", dropped[0])
	if code := deliver(redelivery); code != http.StatusOK {
		t.Fatalf("redelivery of dropped %s answered %d, want 200", dropped[0], code)
	}
	// The 5 queued deliveries and the redelivery each fail on GitHub's 503.
	// go-githubapp marks a worker idle before its error callback counts the
	// error, so the count is awaited rather than read after a drain.
	waitMetric(t, srv, handlerErrSample, 6)
}

// loadRounds is how many turns the floor and the bot take at each rate.
const loadRounds = 10

// TestWebhookLoad drives the real server over loopback, open-loop, at 200
// and 1000 deliveries/s of a mix of recorded events (loadmix_test.go),
// beside the same bot with its workers held (intake alone) and the bare
// HMAC floor, taking turns in rounds, then with a small queue and a hung
// GitHub to show drops. The load comes from a process of its own (this
// test binary, as TestLoadGeneratorChild), so the server's goroutines
// cannot delay the sends. It is run by hand (about 70 s on a quiet
// machine; the latencies mean something only there, the CPU ratio holds
// better on a busy one):
//
//	SANDBOX_LOADTEST=1 go test -count=1 -run TestWebhookLoad -v ./app
//
// SANDBOX_LOADTEST_DURATION (default 5s) sets the measured time per line.
func TestWebhookLoad(t *testing.T) {
	testenv.HandRun(t, "SANDBOX_LOADTEST", "go test -count=1 -run TestWebhookLoad -v ./app")
	duration := 5 * time.Second
	if v := os.Getenv("SANDBOX_LOADTEST_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SANDBOX_LOADTEST_DURATION: %q is not a positive duration such as 5s", v)
		}
		duration = d
	}
	const warmup = time.Second
	mix, mixDesc := loadMessages(t)
	cmd := commandComment(t, "/plan")
	out := os.Stdout

	fmt.Fprintf(out, "\nWebhook intake, open loop over loopback from a separate process, %s per line in %d rounds that alternate the targets, after %s of warm-up;\n", duration, loadRounds, warmup)
	fmt.Fprintln(out, "latency = scheduled send to answer read; cpu = the server process's CPU time (user+sys) per delivery, warm-up included.")
	fmt.Fprintf(out, "Events: recorded @octokit/webhooks-examples payloads, signed, %s.\n", mixDesc)
	fmt.Fprintln(out, "Review events on an agent PR reach a worker, which decodes them and returns without calling GitHub, so the run")
	fmt.Fprintln(out, "measures intake and workers, not the fake GitHub (checked below: the fake receives no request).")

	// Default queue and workers, GitHub the fake.
	gh := githubtest.New(t, githubtest.Options{})
	bot := newIntakeServer(t, gh.URL(), nil, logFile(t))
	botHTTP := httptest.NewServer(bot.Handler())
	defer botHTTP.Close()
	floorHTTP := httptest.NewServer(loadtest.Floor([]byte(testSecret)))
	defer floorHTTP.Close()

	// The same bot with its workers held on a hung GitHub and a queue that
	// takes a whole run: the payloads wait unparsed, so its line is the
	// intake alone, without the workers' CPU competing for the machine.
	hung := newStallingGitHub(t)
	heldQueue := loadtest.Plan{Rate: 1000, Duration: warmup + duration}.Requests() + 1
	heldBot := newIntakeServer(t, hung.URL(), map[string]string{"SANDBOX_QUEUE_SIZE": strconv.Itoa(heldQueue)}, logFile(t))
	heldHTTP := httptest.NewServer(heldBot.Handler())
	defer heldHTTP.Close()
	holdWorkers := func(prefix string) {
		t.Helper()
		hung.hold()
		for i := range DefaultWorkers {
			if code := githubtest.Deliver(t, heldHTTP.URL+WebhookPath, "issue_comment", prefix+strconv.Itoa(i), cmd, loadtest.Sign(cmd, []byte(testSecret))); code != http.StatusOK {
				t.Fatalf("delivery to hold a worker answered %d", code)
			}
		}
		hung.waitHeld(t, DefaultWorkers)
	}

	var rows []loadtest.Row
	var verdicts []string
	sent2xx, sent503 := 0, 0
	count := func(rs ...*loadtest.Result) {
		for _, r := range rs {
			if r == nil { // no warm-up
				continue
			}
			sent2xx += r.Count2xx()
			sent503 += r.Codes[http.StatusServiceUnavailable]
			if r.Errors > 0 || r.Other() > 0 {
				t.Errorf("%d/s: %d answers neither 2xx nor 503 and %d transport errors (first: %s)", r.Rate, r.Other(), r.Errors, r.FirstError)
			}
		}
	}
	for _, rate := range []int{200, 1000} {
		p := loadtest.Plan{Rate: rate, Duration: duration / loadRounds * loadRounds}
		warm := loadtest.Plan{Rate: rate, Duration: warmup}
		perDelivery := func(d time.Duration) string {
			return fmt.Sprintf("cpu %.0fµs/delivery", float64(d.Microseconds())/float64(p.Requests()+warm.Requests()))
		}

		// The measured time is cut into rounds; in each, the floor and the
		// bot take turns (in alternating order), so a burst of load from
		// other processes on a shared machine falls on both alike.
		// Warm-up (round 0 only) opens connections and grows the heap; it
		// is not shown, but it counts in /metrics like any delivery.
		seg := loadtest.Plan{Rate: rate, Duration: duration / loadRounds}
		var floorParts, botParts, heldParts []*loadtest.Result
		var floorCPU, botCPU time.Duration
		var peak int64
		for round := range loadRounds {
			w := loadtest.Plan{}
			if round == 0 {
				w = warm
			}
			id := fmt.Sprintf("%d-%d-", rate, round)
			runFloor := func() {
				floorCPU += cpuTime(t, func() {
					floorParts = append(floorParts, generate(t, floorHTTP.URL, "floor-"+id, mix, w, seg).Run)
				})
			}
			runBot := func() {
				botCPU += cpuTime(t, func() {
					peak = max(peak, queuePeak(bot, func() {
						res := generate(t, botHTTP.URL, "bot-"+id, mix, w, seg)
						count(res.Warmup, res.Run)
						botParts = append(botParts, res.Run)
					}))
					drainServer(t, bot) // the workers' parsing is part of the bot's cost
				})
			}
			if round%2 == 0 {
				runFloor()
				runBot()
			} else {
				runBot()
				runFloor()
			}

			holdWorkers("hold-" + id)
			held := generate(t, heldHTTP.URL, "held-"+id, mix, w, seg)
			sent := held.Run.Sent
			taken := held.Run.Count2xx()
			if held.Warmup != nil {
				sent, taken = sent+held.Warmup.Sent, taken+held.Warmup.Count2xx()
			}
			if taken != sent {
				t.Errorf("%d/s with workers held and room for every delivery: %d of %d taken (%v, %d errors, first %s)",
					rate, taken, sent, held.Run.Codes, held.Run.Errors, held.Run.FirstError)
			}
			heldParts = append(heldParts, held.Run)
			hung.release()
			drainServer(t, heldBot)
		}
		res, held, floor := loadtest.Merge(botParts...), loadtest.Merge(heldParts...), loadtest.Merge(floorParts...)

		rows = append(rows,
			loadtest.Row{Label: fmt.Sprintf("bot (queue %d, %d workers)", DefaultQueueSize, DefaultWorkers), Result: res,
				Note: fmt.Sprintf("%s, queue peak %d/%d", perDelivery(botCPU), peak, DefaultQueueSize)},
			loadtest.Row{Label: "bot, workers held (intake only)", Result: held},
			loadtest.Row{Label: "floor (read body + HMAC)", Result: floor, Note: perDelivery(floorCPU)})
		verdicts = append(verdicts, verdict(res, held, floor, peak, float64(botCPU)/float64(floorCPU)))
	}
	if got := metricSum(t, bot, deliveriesName); int(got) != sent2xx {
		t.Errorf("%s = %v (all events and statuses), but %d deliveries were answered 2xx", deliveriesName, got, sent2xx)
	}
	if qf, rd := metricSum(t, bot, queueFullSample), metricSum(t, bot, readersSample); int(qf+rd) != sent503 {
		t.Errorf("%s = %v and %s = %v, but %d deliveries were answered 503", queueFullSample, qf, readersSample, rd, sent503)
	}
	if n := len(gh.Requests()); n != 0 {
		t.Errorf("the fake GitHub received %d requests; comments without a command must not call GitHub", n)
	}

	// A small queue with every worker stuck on a GitHub that does not answer:
	// the queue fills at once and the rest is dropped, each drop counted.
	const smallQueue = 16
	hung.hold()
	small := newIntakeServer(t, hung.URL(), map[string]string{"SANDBOX_QUEUE_SIZE": strconv.Itoa(smallQueue)}, logFile(t))
	smallHTTP := httptest.NewServer(small.Handler())
	defer smallHTTP.Close()
	res := generate(t, smallHTTP.URL, "small-", []loadtest.Message{{Body: cmd, Header: map[string]string{
		"X-GitHub-Event": "issue_comment", loadtest.SignatureHeader: loadtest.Sign(cmd, []byte(testSecret)),
	}}}, loadtest.Plan{}, loadtest.Plan{Rate: 1000, Duration: 2 * time.Second}).Run
	queueFull, readers := metricSum(t, small, queueFullSample), metricSum(t, small, readersSample)
	rows = append(rows, loadtest.Row{Label: fmt.Sprintf("bot (queue %d, GitHub hung)", smallQueue), Result: res,
		Note: fmt.Sprintf("in /metrics: queue_full %.0f, too_many_readers %.0f", queueFull, readers)})
	if drops := res.Codes[http.StatusServiceUnavailable]; int(queueFull+readers) != drops {
		t.Errorf("%s = %v and %s = %v, but %d deliveries were answered 503", queueFullSample, queueFull, readersSample, readers, drops)
	}
	if ok := res.Count2xx(); ok < smallQueue || ok > smallQueue+DefaultWorkers {
		t.Errorf("%d deliveries taken with a queue of %d and %d hung workers; want between %d and %d",
			ok, smallQueue, DefaultWorkers, smallQueue, smallQueue+DefaultWorkers)
	}
	hung.release()
	drainServer(t, small)

	fmt.Fprintln(out)
	if err := loadtest.WriteTable(out, rows); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(out)
	for _, v := range verdicts {
		fmt.Fprintln(out, v)
	}
	fmt.Fprintf(out, "Small queue: /plan comments (%d bytes) whose handler blocks asking a hung GitHub for the sender's permission;\n", len(cmd))
	fmt.Fprintf(out, "/metrics %s = %.0f plus %s = %.0f (bodies being read at once over the cap, on a stalled machine), equal to the 503s the generator counted.\n\n",
		queueFullSample, queueFull, readersSample, readers)
}

// TestLoadGeneratorChild is no test: it is TestWebhookLoad's load
// generator, started as a process of its own by loadtest.RunChild.
func TestLoadGeneratorChild(t *testing.T) {
	child, err := loadtest.ServeChild(t.Context())
	if !child {
		t.Skip("runs only as TestWebhookLoad's load generator process")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// generate sends the signed deliveries of mix in turn to the bot at url
// from a child process: warm (skipped when its Rate is 0), then run.
func generate(t *testing.T, url, prefix string, mix []loadtest.Message, warm, run loadtest.Plan) *loadtest.Outcome {
	t.Helper()
	out, err := loadtest.RunChild(t.Context(), os.Args[0], []string{"-test.run=^TestLoadGeneratorChild$", "-test.count=1"}, loadtest.Spec{
		URL: url + WebhookPath, Mix: mix,
		Header:   map[string]string{"Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/loadtest"},
		IDHeader: "X-GitHub-Delivery", IDPrefix: prefix, Warmup: warm, Run: run, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if warm.Rate > 0 && out.Warmup == nil || out.Run == nil {
		t.Fatalf("load generator reported no result: %+v", out)
	}
	return out
}

// waitMetric waits until a /metrics sample reaches want.
func waitMetric(t *testing.T, s *Server, sample string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := metricValue(t, s, sample)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after 20s, want %v", sample, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// cpuTime runs fn and returns the CPU time (user + system) this process,
// the server with its workers, spent meanwhile; the load generator runs in
// a child process and is not counted. On a machine shared with other work,
// CPU time per delivery stays telling when wall-clock latencies no longer
// are.
func cpuTime(t *testing.T, fn func()) time.Duration {
	t.Helper()
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatalf("getrusage: %v", err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := used()
	fn()
	return used() - before
}

// queuePeak runs fn and returns the longest the bot's queue got meanwhile,
// sampled every 10ms (often enough for a queue that drains in
// milliseconds; a faster sampler's wake-ups showed in the bot's CPU).
func queuePeak(s *Server, fn func()) int64 {
	done, peak := make(chan struct{}), make(chan int64)
	go func() {
		var m int64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			m = max(m, s.gauge(githubapp.MetricsKeyQueueLength))
			select {
			case <-done:
				peak <- m
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(done)
	return <-peak
}

// verdict compares one rate's run with the floor's against the issue's
// goal: p99 within 1.5x of the floor, no drops while the queue has room.
// cpu is the server process's CPU time for the bot's rounds over the
// floor's: unlike latencies, it holds on a machine busy with other work.
func verdict(bot, held, floor *loadtest.Result, peak int64, cpu float64) string {
	ratio := func(r *loadtest.Result, q float64) float64 {
		if f := floor.Quantile(q); f > 0 {
			return float64(r.Quantile(q)) / float64(f)
		}
		return 0
	}
	goal := "met"
	if r := ratio(bot, 0.99); r == 0 || r > 1.5 {
		goal = "NOT met"
	}
	drops := bot.Codes[http.StatusServiceUnavailable]
	why := "the queue had room throughout"
	switch {
	case peak >= DefaultQueueSize:
		why = fmt.Sprintf("the queue filled (peak %d/%d): the workers could not keep up on this machine", peak, DefaultQueueSize)
	case drops > 0:
		why = fmt.Sprintf("the queue had room (peak %d/%d): the 503s are the cap of %d bodies read at once (SANDBOX_MAX_BODY_READERS)", peak, DefaultQueueSize, DefaultMaxBodyReaders)
	}
	return fmt.Sprintf("%d/s: p99 %.3fms vs floor %.3fms = %.2fx (goal <= 1.5x: %s), p50 %.2fx; cpu %.2fx; intake alone p99 %.2fx, p50 %.2fx; %d dropped, %s",
		bot.Rate, ms(bot.Quantile(0.99)), ms(floor.Quantile(0.99)), ratio(bot, 0.99), goal, ratio(bot, 0.5), cpu,
		ratio(held, 0.99), ratio(held, 0.5), drops, why)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// logFile is where a load-tested bot logs, as in production: JSON lines to
// a file, not to the terminal the table is printed on.
func logFile(t *testing.T) io.Writer {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "bot.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
