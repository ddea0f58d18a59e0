package app

import (
	"fmt"
	"net/http"
)

// signature256Header is the only signature the bot accepts: SHA-1
// (X-Hub-Signature) is refused even when it is valid.
const signature256Header = "X-Hub-Signature-256"

// guardIntake runs before a webhook body is read: a delivery without an
// X-Hub-Signature-256 header is refused (401) without reading its body,
// and at most readers bodies are read at once (over that, 503): until the
// signature is checked, anyone on the network can send one. Both are
// counted.
func (s *Server) guardIntake(readers int, next http.Handler) http.Handler {
	sem := make(chan struct{}, readers)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(signature256Header) == "" {
			reason := "bad_signature"
			if r.Header.Get("X-Hub-Signature") != "" {
				reason = "sha1_only"
			}
			s.metrics.rejected.WithLabelValues(reason).Inc()
			http.Error(w, "missing "+signature256Header+" (SHA-1 signatures are not accepted)", http.StatusUnauthorized)
			return
		}
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		default:
			s.metrics.rejected.WithLabelValues("too_many_readers").Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many deliveries being read", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// NewHTTPServer is an http.Server for addr with the bot's timeouts, for
// the webhook and the admin listener alike: a slow or idle client cannot
// hold a connection open for ever.
func NewHTTPServer(cfg *Config, addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: DefaultHTTPHeaderTimeout,
		ReadTimeout:       cfg.Ops.HTTPReadTimeout,
		WriteTimeout:      cfg.Ops.HTTPWriteTimeout,
		IdleTimeout:       cfg.Ops.HTTPIdleTimeout,
	}
}

// admit parses a signed delivery's payload once, on the request's
// goroutine, and decides whether it is worth a worker: false for a
// delivery the handlers would drop (webhook.Adapters.MayAct). At 1,000
// deliveries/s on two cores, workers decoding events only to return
// compete for the CPU the intake needs to answer. A body that is not JSON
// is an error, answered 400 now rather than failing in a worker after
// GitHub was told 200. fastjson parses a 15 KB payload several times
// faster than encoding/json, and a pooled parser reuses its tree, so this
// costs about what validating alone did.
func (d *dedupeScheduler) admit(eventType string, payload []byte) (bool, error) {
	p := d.parsers.Get()
	defer d.parsers.Put(p)
	v, err := p.ParseBytes(payload)
	if err != nil {
		return false, fmt.Errorf("payload is not valid JSON: %w", err)
	}
	return d.mayAct(eventType, v), nil
}
