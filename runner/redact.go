package runner

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Redacted replaces every secret value in text the runner writes.
const Redacted = "[REDACTED]"

// minSecretLen keeps the redactor from mangling output over values too short
// to be credentials ("1", "true"); such values are no secret anyway.
const minSecretLen = 4

// Redactor removes secret values (the secrets given to the run and the token
// in the token file) from everything the runner writes: logs, progress
// lines, output tails in the receipt. The token file is re-read on Refresh,
// so a token refreshed mid-run is redacted too; old values stay redacted.
type Redactor struct {
	tokenFile string

	mu      sync.RWMutex
	secrets []string // longest first, so a secret containing another wins
}

// NewRedactor redacts values and the content of tokenFile (if not empty).
func NewRedactor(tokenFile string, values ...string) *Redactor {
	r := &Redactor{tokenFile: tokenFile}
	r.Add(values...)
	r.Refresh()
	return r
}

// Add registers more secret values.
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < minSecretLen {
			continue
		}
		// A secret printed inside JSON (our own logs) appears escaped.
		forms := []string{v}
		if b, err := json.Marshal(v); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != v {
				forms = append(forms, esc)
			}
		}
		for _, f := range forms {
			if !slices.Contains(r.secrets, f) {
				r.secrets = append(r.secrets, f)
			}
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// Refresh re-reads the token file.
func (r *Redactor) Refresh() {
	if r.tokenFile == "" {
		return
	}
	if b, err := os.ReadFile(r.tokenFile); err == nil {
		r.Add(string(b))
	}
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return s
}

// Bytes is String for byte slices.
func (r *Redactor) Bytes(b []byte) []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		if bytes.Contains(b, []byte(sec)) {
			b = bytes.ReplaceAll(b, []byte(sec), []byte(Redacted))
		}
	}
	return b
}

// Writer wraps w so that every Write is redacted. Callers write whole
// records (zerolog writes one JSON object per call), so a secret is never
// split across two writes.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &redactWriter{r: r, w: w} }

type redactWriter struct {
	r *Redactor
	w io.Writer
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	if _, err := rw.w.Write(rw.r.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Contains reports whether b holds any secret.
func (r *Redactor) Contains(b []byte) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		if bytes.Contains(b, []byte(sec)) {
			return true
		}
	}
	return false
}

// Values are the secret values (and their JSON-escaped forms), for the
// secret scan: a run's own secret in the change is a finding.
func (r *Redactor) Values() []string {
	r.Refresh()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.secrets)
}
