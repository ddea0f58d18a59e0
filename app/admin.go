package app

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// AdminHandler serves what only the operator should see, on the admin
// listener (SANDBOX_ADMIN_LISTEN, loopback by default): the dashboard
// (repository names, runs), /metrics, and /readyz with the problems found.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.prom, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { s.readyz(w, r, true) })
	mux.HandleFunc("GET /{$}", s.dashboard)
	s.dash.mountAdmin(mux)
	s.live.mount(mux, nil, func(h func(http.ResponseWriter, *http.Request, viewer), _ bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h(w, r, viewer{}) }
	})
	return s.withLogger(mux)
}

// readiness is the result of the backend's start-up checks, re-run when
// /readyz asks and the last check is older than readyMaxAge.
type readiness struct {
	backend dispatch.Backend
	mu      sync.Mutex
	at      time.Time
	errs    []error
}

const readyMaxAge = 30 * time.Second

// check runs the backend's readiness checks (engine or Nomad reachable,
// image present, isolation accepted, nodes to place runs) and logs them.
func (rd *readiness) check(ctx context.Context, log zerolog.Logger) []error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	var errs []error
	if c, ok := rd.backend.(dispatch.ReadinessChecker); ok {
		errs = c.Ready(ctx)
	}
	rd.at, rd.errs = time.Now(), errs
	for _, err := range errs {
		log.Error().Err(err).Str("backend", rd.backend.Name()).Msg("backend not ready: runs fail and are reported on their issues until this is fixed")
	}
	if len(errs) == 0 {
		log.Info().Str("backend", rd.backend.Name()).Msg("backend ready")
	}
	return errs
}

func (rd *readiness) current(ctx context.Context, log zerolog.Logger) []error {
	rd.mu.Lock()
	fresh, errs := time.Since(rd.at) < readyMaxAge, rd.errs
	rd.mu.Unlock()
	if fresh {
		return errs
	}
	return rd.check(ctx, log)
}

// readyz answers 200 when the backend can start runs and 503 when not.
// Only the admin listener says why: the reasons name hosts and images.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, detail bool) {
	errs := s.ready.current(r.Context(), s.logger)
	body := map[string]any{"ready": len(errs) == 0, "backend": s.base.Backend.Name()}
	if detail {
		problems := []string{}
		for _, err := range errs {
			problems = append(problems, err.Error())
		}
		body["problems"] = problems
	}
	w.Header().Set("Content-Type", "application/json")
	if len(errs) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
