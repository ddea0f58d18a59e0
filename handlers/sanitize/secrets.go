package sanitize

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"
)

// RedactedText replaces a secret in everything the bot posts.
const RedactedText = "[REDACTED]"

// minSecretBytes: shorter values ("1", "true") are no credentials, and
// replacing them would mangle ordinary text.
const minSecretBytes = 4

// Secrets are the values the bot must never post: every installation
// token it minted for a sandbox (refreshes included, kept until a while
// after they expire) and the values of SANDBOX_PASS_ENV. The bot's GitHub
// client redacts them from every request body it sends, and results are
// redacted before they are sanitized and cut (so a cut cannot leave half a
// token).
type Secrets struct {
	mu     sync.RWMutex
	values map[string]time.Time // value -> forget after (zero: never)
	sorted []string             // longest first, with JSON-escaped forms
	now    func() time.Time
}

// NewSecrets returns an empty set.
func NewSecrets() *Secrets {
	return &Secrets{values: map[string]time.Time{}, now: time.Now}
}

// tokenKeep is how long a token is redacted after it expires: text posted
// late (a result read after a restart) may still quote it.
const tokenKeep = 24 * time.Hour

// Add registers values redacted for as long as the bot runs.
func (s *Secrets) Add(values ...string) {
	s.add(time.Time{}, values...)
}

// AddToken registers a minted token, redacted until a day after expiry.
func (s *Secrets) AddToken(token string, expires time.Time) {
	if expires.IsZero() {
		expires = s.now().Add(time.Hour)
	}
	s.add(expires.Add(tokenKeep), token)
}

func (s *Secrets) add(until time.Time, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < minSecretBytes {
			continue
		}
		if old, ok := s.values[v]; ok && (old.IsZero() || !until.IsZero() && !until.After(old)) {
			continue
		}
		s.values[v] = until
		changed = true
	}
	if changed {
		s.rebuildLocked()
	}
}

// rebuildLocked drops expired tokens and orders the forms to replace.
func (s *Secrets) rebuildLocked() {
	now := s.now()
	s.sorted = s.sorted[:0]
	for v, until := range s.values {
		if !until.IsZero() && now.After(until) {
			delete(s.values, v)
			continue
		}
		s.sorted = append(s.sorted, v)
		// In a JSON request body a value with quotes or backslashes
		// appears escaped.
		if b, err := json.Marshal(v); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != v {
				s.sorted = append(s.sorted, esc)
			}
		}
	}
	sort.Slice(s.sorted, func(i, j int) bool { return len(s.sorted[i]) > len(s.sorted[j]) })
}

// Redact returns text with every secret replaced by RedactedText.
func (s *Secrets) Redact(text string) string {
	if s == nil {
		return text
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.sorted {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, RedactedText)
		}
	}
	return text
}

// Len is the number of values being redacted (expired tokens included
// until the next Add drops them).
func (s *Secrets) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.values)
}
