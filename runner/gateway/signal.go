package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// NextRequestPath is where the runner waits for the agent's first model
// request: a GET there with ?since=TIME (RFC 3339) answers with the first
// request forwarded at or after TIME (NextRequest), at once if the gateway
// has it among its recent ones, else when it comes. It cannot be a
// provider's route (names start with a letter or digit). The answer holds
// a time and a provider name, nothing of the request.
const NextRequestPath = "/_gateway/next-request"

// NextRequest is the answer at NextRequestPath.
type NextRequest struct {
	Time     time.Time `json:"time"`
	Provider string    `json:"provider"`
}

// keptRequests is how many recent requests the gateway remembers for a
// waiter whose since is past.
const keptRequests = 64

// requestSignal wakes the waiters at NextRequestPath on each forwarded
// request.
type requestSignal struct {
	mu     sync.Mutex
	next   chan struct{} // closed at the next request
	recent []NextRequest // oldest first, at most keptRequests
}

func newRequestSignal() *requestSignal { return &requestSignal{next: make(chan struct{})} }

// fire notes a request to provider now and wakes every waiter.
func (s *requestSignal) fire(provider string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recent) == keptRequests {
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
	s.recent = append(s.recent, NextRequest{Time: time.Now().UTC(), Provider: provider})
	close(s.next)
	s.next = make(chan struct{})
}

// firstSince is the first remembered request at or after since, and a
// channel closed at the next request.
func (s *requestSignal) firstSince(since time.Time) (NextRequest, bool, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recent {
		if !r.Time.Before(since) {
			return r, true, s.next
		}
	}
	return NextRequest{}, false, s.next
}

// serveNext answers with the first request forwarded at or after since, or
// nothing when the caller goes away first.
func (s *requestSignal) serveNext(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "model gateway: "+NextRequestPath+" takes GET")
		return
	}
	since, err := time.Parse(time.RFC3339Nano, req.URL.Query().Get("since"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "model gateway: "+NextRequestPath+" needs ?since=TIME (RFC 3339)")
		return
	}
	for {
		r, ok, next := s.firstSince(since)
		if ok {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(r)
			return
		}
		select {
		case <-next:
		case <-req.Context().Done():
			return
		}
	}
}

// WaitNextRequest waits at the gateway at base (its URL) for the first
// model request it forwards at or after since, until ctx ends.
func WaitNextRequest(ctx context.Context, base string, since time.Time) (NextRequest, error) {
	var nr NextRequest
	u := strings.TrimRight(base, "/") + NextRequestPath + "?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nr, fmt.Errorf("model gateway at %s: %w", base, err)
	}
	// Loopback, never through a proxy.
	c := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return nr, fmt.Errorf("model gateway at %s: wait for the next request: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nr, fmt.Errorf("model gateway at %s: %s answered %s", base, NextRequestPath, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&nr); err != nil {
		return nr, fmt.Errorf("model gateway at %s: %s: %w", base, NextRequestPath, err)
	}
	return nr, nil
}
