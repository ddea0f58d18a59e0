package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sandbox-bot/sandbox-bot/handlers"
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
			p, client, slept := pacedClient(t, srv.URL)
			_, _, err := client.Issues.CreateComment(context.Background(), "o", "r", 1, &github.IssueComment{Body: github.String("hello")})
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
			var longest time.Duration
			for _, d := range *slept {
				longest = max(longest, d)
			}
			if longest < tc.wait-2*time.Second {
				t.Errorf("waited at most %v, want about %v (slept %v)", longest, tc.wait, *slept)
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
	p := newGitHubPacer(60, prometheus.NewRegistry())
	var slept []time.Duration
	p.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	one := &pacedTransport{p: p, ip: p.installation(1)}
	for range writeBurst(60) {
		if err := one.waitTurn(context.Background(), http.MethodPost); err != nil {
			t.Fatal(err)
		}
	}
	if len(slept) != 0 {
		t.Fatalf("the burst of %d writes waited: %v", writeBurst(60), slept)
	}
	one.waitTurn(context.Background(), http.MethodGet)
	(&pacedTransport{p: p, ip: p.installation(2)}).waitTurn(context.Background(), http.MethodPatch)
	if len(slept) != 0 {
		t.Fatalf("a read or another installation waited: %v", slept)
	}
	one.waitTurn(context.Background(), http.MethodDelete)
	if len(slept) != 1 || slept[0] < 900*time.Millisecond {
		t.Fatalf("the write past the burst at 60/min waited %v, want about 1s", slept)
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

// A progress update (handlers.Deferrable) is sent while the bucket is more
// than half full and otherwise fails with handlers.ErrWriteDeferred through
// go-github, reaching nothing and waiting for nothing; the room below is
// kept for results, which still get their turn at once.
func TestPacerDefersProgressWhenThePaceIsLow(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got++
		mu.Unlock()
		io.WriteString(w, `{"id":1}`)
	}))
	defer srv.Close()
	p, client, slept := pacedClient(t, srv.URL)
	progress := handlers.Deferrable(context.Background())
	edit := func(ctx context.Context) error {
		_, _, err := client.Issues.EditComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("step")})
		return err
	}
	burst := writeBurst(60)
	if burst != 20 {
		t.Fatalf("the burst at 60 writes a minute is %d, want 20 (GitHub's 80 less the pace)", burst)
	}
	sent := 0
	for range burst {
		if err := edit(progress); err == nil {
			sent++
		} else if !errors.Is(err, handlers.ErrWriteDeferred) {
			t.Fatalf("a deferred progress edit: %v, want ErrWriteDeferred", err)
		}
	}
	if sent < burst/2-1 || sent > burst/2 {
		t.Fatalf("%d progress edits were sent from a full bucket of %d, want about half", sent, burst)
	}
	if got != sent || len(*slept) != 0 {
		t.Fatalf("GitHub got %d requests for %d sent, and the edits slept %v", got, sent, *slept)
	}
	for range burst - sent {
		if err := edit(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(*slept) != 0 {
		t.Fatalf("the results behind the progress edits waited: %v", *slept)
	}
	if d := testutil.ToFloat64(p.delayed.WithLabelValues("deferred")); d != float64(burst-sent) {
		t.Fatalf("delayed{reason=deferred} = %v, want %d", d, burst-sent)
	}
}

// pacedClient is a go-github client of installation 42 to url through a
// pacer of 60 writes a minute whose waits are noted in *slept, not slept.
func pacedClient(t *testing.T, url string) (*githubPacer, *github.Client, *[]time.Duration) {
	p := newGitHubPacer(60, prometheus.NewRegistry())
	slept := new([]time.Duration)
	p.sleep = func(_ context.Context, d time.Duration) error { *slept = append(*slept, d); return nil }
	client := github.NewClient(&http.Client{Transport: &pacedTransport{next: http.DefaultTransport, p: p, ip: p.installation(42)}})
	client.BaseURL = mustURL(t, url+"/")
	return p, client, slept
}
