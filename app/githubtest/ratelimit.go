package githubtest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RateLimit is GitHub's secondary rate limit on content-creating requests,
// scaled for tests: at most Writes in any window of Per. Zero Writes is no
// limit.
type RateLimit struct {
	Writes int
	Per    time.Duration
}

// writeLimit answers writes over the limit with 403, GitHub's secondary
// rate-limit message and a Retry-After, and counts what it did. Writes are
// counted per installation, as GitHub counts them (whatever token of it a
// request carries); minting and revoking tokens are not content-creating
// and not counted.
type writeLimit struct {
	RateLimit
	mu       sync.Mutex
	recent   map[string][]time.Time
	writes   int
	rejected int
	faults   []*fault
	injected int
}

// fault answers the next n requests that match with status.
type fault struct {
	method, pathSuffix string
	status, n          int
}

func newWriteLimit(l RateLimit) *writeLimit {
	return &writeLimit{RateLimit: l, recent: map[string][]time.Time{}}
}

func countedWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return !strings.HasSuffix(r.URL.Path, "/access_tokens") && r.URL.Path != "/installation/token" && !strings.HasPrefix(r.URL.Path, "/git/")
}

func (s *Server) limitWrites(next http.Handler) http.Handler {
	l := s.limit
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status := l.inject(r); status != 0 {
			writeJSON(w, status, map[string]string{"message": http.StatusText(status) + " (injected by the test)"})
			return
		}
		if l.Writes > 0 && countedWrite(r) {
			who := r.Header.Get("Authorization")
			s.mu.Lock()
			if t := s.tokens[bearer(r)]; t != nil {
				who = fmt.Sprint("installation ", t.InstallationID)
			}
			s.mu.Unlock()
			if wait, ok := l.admit(who, time.Now()); !ok {
				w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds()+0.999)))
				writeJSON(w, http.StatusForbidden, map[string]string{
					"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
					"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
				})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// admit counts a write, or says how long until the window has room.
func (l *writeLimit) admit(who string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.recent[who][:0]
	for _, t := range l.recent[who] {
		if now.Sub(t) < l.Per {
			kept = append(kept, t)
		}
	}
	l.recent[who] = kept
	if len(kept) >= l.Writes {
		l.rejected++
		return kept[0].Add(l.Per).Sub(now), false
	}
	l.recent[who] = append(kept, now)
	l.writes++
	return 0, true
}

// RateLimited returns how many writes the fake served and how many it
// refused for the secondary limit.
func (s *Server) RateLimited() (served, refused int) {
	s.limit.mu.Lock()
	defer s.limit.mu.Unlock()
	return s.limit.writes, s.limit.rejected
}

// FailNext answers the next n requests with that method whose path ends
// with pathSuffix with status, as an outage would.
func (s *Server) FailNext(method, pathSuffix string, status, n int) {
	s.limit.mu.Lock()
	defer s.limit.mu.Unlock()
	s.limit.faults = append(s.limit.faults, &fault{method: method, pathSuffix: pathSuffix, status: status, n: n})
}

// Injected is how many requests FailNext answered.
func (s *Server) Injected() int {
	s.limit.mu.Lock()
	defer s.limit.mu.Unlock()
	return s.limit.injected
}

// ClearFaults ends every FailNext.
func (s *Server) ClearFaults() {
	s.limit.mu.Lock()
	defer s.limit.mu.Unlock()
	s.limit.faults = nil
}

func (l *writeLimit) inject(r *http.Request) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.faults {
		if f.n > 0 && r.Method == f.method && strings.HasSuffix(r.URL.Path, f.pathSuffix) {
			f.n--
			l.injected++
			return f.status
		}
	}
	return 0
}
