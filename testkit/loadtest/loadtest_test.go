package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets this test binary act as RunChild's generator process.
func TestMain(m *testing.M) {
	if child, err := ServeChild(context.Background()); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "load generator:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestFloorChecksTheSignature(t *testing.T) {
	secret := []byte("s3cret")
	body := []byte(`{"action":"created"}`)
	srv := httptest.NewServer(Floor(secret))
	defer srv.Close()
	for _, tc := range []struct {
		name, sig string
		want      int
	}{
		{"good", Sign(body, secret), http.StatusOK},
		{"wrong secret", Sign(body, []byte("other")), http.StatusUnauthorized},
		{"missing", "", http.StatusUnauthorized},
		{"sha1 only", "sha1=00", http.StatusUnauthorized},
		{"not hex", "sha256=zz", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		if tc.sig != "" {
			req.Header.Set(SignatureHeader, tc.sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s signature: got %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// The server answers nobody until every request of the run is in flight.
// Only an open-loop generator, which does not wait for an answer before
// sending the next request, gets all of them answered 200; a closed-loop
// one would see the server give up with 504s.
func TestRunIsOpenLoop(t *testing.T) {
	const n = 20
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			w.WriteHeader(http.StatusOK)
		case <-time.After(10 * time.Second): // a safety net against a hang, not a timing assertion
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	}))
	defer srv.Close()
	client := NewClient(30 * time.Second)
	res, err := Run(t.Context(), client, Plan{Rate: 1000, Duration: n * time.Millisecond}, func(i int) (*http.Request, error) {
		return http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != n || res.Codes[http.StatusOK] != n {
		t.Fatalf("sent %d, answered %v: want all %d answered 200 once all were in flight", res.Sent, res.Codes, n)
	}
	if res.Quantile(0.5) <= 0 || res.Quantile(0.99) < res.Quantile(0.5) {
		t.Errorf("latencies out of order: p50 %s p99 %s", res.Quantile(0.5), res.Quantile(0.99))
	}
}

func TestRunCountsAnswersAndErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.Header.Get("X-Seq"))
		switch i % 4 {
		case 0, 1:
			w.WriteHeader(http.StatusOK)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 3:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	client := NewClient(5 * time.Second)
	res, err := Run(t.Context(), client, Plan{Rate: 2000, Duration: 20 * time.Millisecond}, func(i int) (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("X-Seq", strconv.Itoa(i))
		return req, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 40 || res.Count2xx() != 20 || res.Codes[http.StatusServiceUnavailable] != 10 || res.Other() != 10 || res.Errors != 0 {
		t.Errorf("sent %d 2xx %d 503 %d other %d errors %d: want 40, 20, 10, 10, 0", res.Sent, res.Count2xx(), res.Codes[503], res.Other(), res.Errors)
	}

	// A server that is gone: every request is a transport error, not an answer.
	srv.Close()
	res, err = Run(t.Context(), client, Plan{Rate: 1000, Duration: 5 * time.Millisecond}, func(i int) (*http.Request, error) {
		return http.NewRequest(http.MethodPost, srv.URL, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 5 || res.FirstError == "" || len(res.Codes) != 0 || res.Quantile(0.99) != 0 {
		t.Errorf("against a closed server: errors %d (%v), codes %v: want 5 transport errors", res.Errors, res.FirstError, res.Codes)
	}
}

func TestRunStopsOnBadRequestAndContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	client := NewClient(5 * time.Second)
	boom := errors.New("boom")
	res, err := Run(t.Context(), client, Plan{Rate: 1000, Duration: 10 * time.Millisecond}, func(i int) (*http.Request, error) {
		if i == 3 {
			return nil, boom
		}
		return http.NewRequest(http.MethodGet, srv.URL, nil)
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "build request 3") || res.Sent != 3 {
		t.Errorf("got sent %d, err %v: want 3 sent and the builder's error naming request 3", res.Sent, err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	res, err = Run(ctx, client, Plan{Rate: 1, Duration: time.Hour}, func(i int) (*http.Request, error) {
		cancel() // the second request is an hour away; cancelling must end the run now
		return http.NewRequest(http.MethodGet, srv.URL, nil)
	})
	if !errors.Is(err, context.Canceled) || res.Sent != 1 {
		t.Errorf("got sent %d, err %v: want the run to stop after 1 with context.Canceled", res.Sent, err)
	}
}

func TestPlanValidation(t *testing.T) {
	for _, p := range []Plan{{Rate: 0, Duration: time.Second}, {Rate: 10, Duration: time.Millisecond}} {
		if _, err := Run(t.Context(), http.DefaultClient, p, nil); err == nil || !strings.Contains(err.Error(), "loadtest plan") {
			t.Errorf("plan %+v: got %v, want an error naming the bad field", p, err)
		}
	}
}

func TestQuantileNearestRank(t *testing.T) {
	r := &Result{}
	for i := 1; i <= 100; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond, 0.001: time.Millisecond} {
		if got := r.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %s, want %s", q, got, want)
		}
	}
}

func TestMergeAddsUpParts(t *testing.T) {
	a := &Result{Rate: 10, Sent: 3, Codes: map[int]int{200: 2}, Errors: 1, FirstError: "refused", MaxLag: 2 * time.Millisecond,
		Latencies: []time.Duration{1, 5}}
	b := &Result{Rate: 10, Sent: 2, Codes: map[int]int{200: 1, 503: 1}, MaxLag: time.Millisecond, Latencies: []time.Duration{3, 4}}
	m := Merge(a, b)
	if m.Rate != 10 || m.Sent != 5 || m.Codes[200] != 3 || m.Codes[503] != 1 || m.Errors != 1 || m.FirstError != "refused" || m.MaxLag != 2*time.Millisecond {
		t.Errorf("Merge = %+v", m)
	}
	if !slices.Equal(m.Latencies, []time.Duration{1, 3, 4, 5}) {
		t.Errorf("latencies %v, want the parts' together, ascending", m.Latencies)
	}
	if a.Latencies[1] != 5 || len(b.Latencies) != 2 {
		t.Errorf("Merge changed its parts: %v %v", a.Latencies, b.Latencies)
	}
}

func TestWriteTable(t *testing.T) {
	r := summarise(200, []outcome{
		{code: 200, latency: time.Millisecond}, {code: 200, latency: 3 * time.Millisecond},
		{code: 503, latency: 2 * time.Millisecond, lag: 100 * time.Microsecond}, {err: errors.New("refused")},
	})
	var buf bytes.Buffer
	if err := WriteTable(&buf, []Row{{Label: "bot", Result: r, Note: "queue-peak=3/500"}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row, got:\n%s", buf.String())
	}
	fields := strings.Fields(lines[1])
	want := []string{"bot", "200", "4", "2", "1", "0", "1", "2.000ms", "3.000ms", "0.100ms", "queue-peak=3/500"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("row %q, want %q", fields, want)
	}
}

// A generator in a child process (this test binary, through TestMain) sends
// the warm-up and the run with their own ids and reports both.
func TestRunChild(t *testing.T) {
	var mu sync.Mutex
	ids := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		ids[r.Header.Get("X-Id")] = true
		mu.Unlock()
		if string(body) != "payload" || r.Header.Get("X-Static") != "yes" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	spec := Spec{
		URL: srv.URL, Body: []byte("payload"), Header: map[string]string{"X-Static": "yes"},
		IDHeader: "X-Id", IDPrefix: "r-", Timeout: 5 * time.Second,
		Warmup: Plan{Rate: 1000, Duration: 3 * time.Millisecond}, Run: Plan{Rate: 1000, Duration: 10 * time.Millisecond},
	}
	out, err := RunChild(t.Context(), os.Args[0], []string{"-test.run=^$"}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if out.Warmup.Sent != 3 || out.Run.Sent != 10 || out.Run.Codes[http.StatusAccepted] != 10 || out.Warmup.Count2xx() != 3 {
		t.Fatalf("warm-up %+v, run %+v: want 3 and 10 requests answered 202", out.Warmup, out.Run)
	}
	if len(out.Run.Latencies) != 10 || out.Run.Quantile(1) <= 0 {
		t.Errorf("latencies did not survive the trip: %v", out.Run.Latencies)
	}
	if !ids["warm-r-2"] || !ids["r-9"] || len(ids) != 13 {
		t.Errorf("ids seen %v: want warm-r-0..2 and r-0..9", ids)
	}

	// A mix sends its messages in turn, each with its own headers.
	mixed := map[string]int{}
	mixSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		mixed[r.Header.Get("X-Kind")+"="+string(body)+","+r.Header.Get("X-Static")]++
		mu.Unlock()
	}))
	defer mixSrv.Close()
	mix := Spec{
		URL: mixSrv.URL, Header: map[string]string{"X-Static": "yes", "X-Kind": "none"}, Timeout: 5 * time.Second,
		Mix: []Message{{Body: []byte("a"), Header: map[string]string{"X-Kind": "A"}}, {Body: []byte("b"), Header: map[string]string{"X-Kind": "B"}}},
		Run: Plan{Rate: 1000, Duration: 5 * time.Millisecond},
	}
	if _, err := RunChild(t.Context(), os.Args[0], []string{"-test.run=^$"}, mix); err != nil {
		t.Fatal(err)
	}
	if mixed["A=a,yes"] != 3 || mixed["B=b,yes"] != 2 || len(mixed) != 2 {
		t.Errorf("mix received %v: want a with A three times, b with B twice, the shared header on each", mixed)
	}

	// A child that cannot run the spec fails with its output in the error.
	spec.URL = "http://127.0.0.1:0/\x00"
	if _, err := RunChild(t.Context(), os.Args[0], []string{"-test.run=^$"}, spec); err == nil || !strings.Contains(err.Error(), "load generator") {
		t.Errorf("bad spec: got %v, want the child's failure", err)
	}
}
