// Package loadtest sends HTTP requests on a fixed schedule and summarises
// how they were answered. It measures the bot's webhook intake against a
// bare HMAC-checking floor (see app/bench_test.go and app/loadtest_test.go).
//
// The generator is open-loop: request i leaves at start + i/rate whether or
// not earlier ones were answered, and its latency counts from that scheduled
// instant. A closed-loop client (send, wait, send) slows down with the
// server and hides exactly the queueing a load test is meant to show.
package loadtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// SignatureHeader carries the body's HMAC-SHA256 under the webhook secret.
const SignatureHeader = "X-Hub-Signature-256"

// Sign returns the X-Hub-Signature-256 value GitHub would send for body.
func Sign(body, secret []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Floor is the least any webhook endpoint must do: read the body and check
// its HMAC. It answers 200 on a good signature and 401 otherwise. The bot's
// intake is measured against it.
func Floor(secret []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One buffer of the announced size: io.ReadAll would grow its
		// buffer a dozen times for a 20 KB body, and a floor must be the
		// least an endpoint does.
		var buf bytes.Buffer
		if r.ContentLength > 0 {
			buf.Grow(int(min(r.ContentLength, 1<<20)) + bytes.MinRead)
		}
		if _, err := buf.ReadFrom(r.Body); err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		body := buf.Bytes()
		got, ok := strings.CutPrefix(r.Header.Get(SignatureHeader), "sha256=")
		sum, derr := hex.DecodeString(got)
		if !ok || derr != nil {
			http.Error(w, "missing or malformed "+SignatureHeader, http.StatusUnauthorized)
			return
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		if !hmac.Equal(sum, mac.Sum(nil)) {
			http.Error(w, "signature check failed", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// Plan is one open-loop run.
type Plan struct {
	// Rate is requests per second.
	Rate int
	// Duration bounds the run: Rate*Duration requests are sent, then Run
	// waits for their answers.
	Duration time.Duration
}

// Requests returns how many requests the plan sends.
func (p Plan) Requests() int {
	return int(p.Duration * time.Duration(p.Rate) / time.Second)
}

func (p Plan) validate() error {
	switch {
	case p.Rate < 1:
		return fmt.Errorf("loadtest plan: Rate %d: must be at least 1 request per second", p.Rate)
	case p.Rate > int(time.Second):
		return fmt.Errorf("loadtest plan: Rate %d: above one request per nanosecond", p.Rate)
	case p.Requests() < 1:
		return fmt.Errorf("loadtest plan: Duration %s at %d/s sends no request", p.Duration, p.Rate)
	}
	return nil
}

// NewClient returns a client for Run: no proxy (the traffic is loopback
// only), enough idle keep-alive connections for the requests in flight at
// once, and a bound on each request so a stuck server cannot hang a run.
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second, DisableCompression: true,
	}}
}

// RequestFunc builds request i (0-based). An error stops the run.
type RequestFunc func(i int) (*http.Request, error)

// Run sends p.Requests() requests built by newReq at p.Rate through client
// and waits for every answer. The client's Timeout bounds each request, so a
// server that never answers ends the run as transport errors, not a hang.
// Run stops scheduling when ctx ends and returns what it has with ctx's
// error.
func Run(ctx context.Context, client *http.Client, p Plan, newReq RequestFunc) (*Result, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	n := p.Requests()
	interval := time.Second / time.Duration(p.Rate)
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C

	var runErr error
	sent := 0
	start := time.Now()
schedule:
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				runErr = ctx.Err()
				break schedule
			}
		}
		req, err := newReq(i)
		if err != nil {
			runErr = fmt.Errorf("build request %d: %w", i, err)
			break
		}
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i] = send(client, req.WithContext(ctx), at)
		}()
	}
	wg.Wait()
	return summarise(p.Rate, outcomes[:sent]), runErr
}

// outcome is one request's fate.
type outcome struct {
	code    int           // 0 when no answer came
	err     error         // transport error
	latency time.Duration // scheduled send → body read
	lag     time.Duration // scheduled send → actual send
}

func send(client *http.Client, req *http.Request, at time.Time) outcome {
	o := outcome{lag: time.Since(at)}
	resp, err := client.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	o.latency = time.Since(at)
	if err != nil {
		o.err = fmt.Errorf("read answer: %w", err)
		return o
	}
	o.code = resp.StatusCode
	return o
}

// Result is what a run saw. It travels as JSON from a generator process
// (see RunChild).
type Result struct {
	Rate int `json:"rate"`
	Sent int `json:"sent"`
	// Codes counts answers by status code.
	Codes map[int]int `json:"codes"`
	// Errors counts requests that got no (complete) answer; FirstError is
	// the first of them.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// MaxLag is the worst delay between a request's scheduled and actual
	// send: when it nears the interval, the generator itself could not keep
	// the schedule and the figures say more about the client than the
	// server.
	MaxLag time.Duration `json:"max_lag_ns"`
	// Latencies of answered requests, ascending.
	Latencies []time.Duration `json:"latencies_ns"`
}

func summarise(rate int, outcomes []outcome) *Result {
	r := &Result{Rate: rate, Sent: len(outcomes), Codes: map[int]int{}}
	for _, o := range outcomes {
		r.MaxLag = max(r.MaxLag, o.lag)
		if o.err != nil {
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = o.err.Error()
			}
			continue
		}
		r.Codes[o.code]++
		r.Latencies = append(r.Latencies, o.latency)
	}
	slices.Sort(r.Latencies)
	return r
}

// Merge adds up results of one rate taken in several parts (a run split
// into rounds that alternate with other targets).
func Merge(parts ...*Result) *Result {
	m := &Result{Codes: map[int]int{}}
	for _, r := range parts {
		m.Rate = r.Rate
		m.Sent += r.Sent
		m.Errors += r.Errors
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
		m.MaxLag = max(m.MaxLag, r.MaxLag)
		for code, n := range r.Codes {
			m.Codes[code] += n
		}
		m.Latencies = append(m.Latencies, r.Latencies...)
	}
	slices.Sort(m.Latencies)
	return m
}

// Count2xx is the number of successful answers.
func (r *Result) Count2xx() int {
	n := 0
	for code, c := range r.Codes {
		if code >= 200 && code < 300 {
			n += c
		}
	}
	return n
}

// Other is the number of answers neither 2xx nor 503.
func (r *Result) Other() int {
	return r.Sent - r.Errors - r.Count2xx() - r.Codes[http.StatusServiceUnavailable]
}

// Quantile returns the q-quantile (0 < q <= 1) of the answered requests'
// latency by the nearest-rank method, or 0 when none was answered.
func (r *Result) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(r.Latencies)))) - 1
	return r.Latencies[min(max(rank, 0), len(r.Latencies)-1)]
}

// Row is one line of a report table.
type Row struct {
	Label  string
	Result *Result
	// Note is printed last, e.g. how full the server's queue got.
	Note string
}

// WriteTable prints rows as an aligned table: rate, sent, 2xx, 503, other
// answers, transport errors, p50, p99, the generator's worst lag and the
// row's note.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\trate/s\tsent\t2xx\t503\tother\terrors\tp50\tp99\tmax lag\tnote\t")
	for _, row := range rows {
		r := row.Result
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", row.Label, r.Rate, r.Sent, r.Count2xx(),
			r.Codes[http.StatusServiceUnavailable], r.Other(), r.Errors,
			fmtDuration(r.Quantile(0.50)), fmtDuration(r.Quantile(0.99)), fmtDuration(r.MaxLag), row.Note)
	}
	return tw.Flush()
}

func fmtDuration(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}
