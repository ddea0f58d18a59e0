package app

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rcrowley/go-metrics"
	"github.com/rs/zerolog"
	"github.com/valyala/fastjson"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
	"github.com/sandbox-bot/sandbox-bot/handlers/webhook"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// MaxPayloadBytes is GitHub's own cap on webhook payloads.
const MaxPayloadBytes = 25 << 20

// WebhookPath is where GitHub delivers events.
const WebhookPath = "/api/github/hook"

// Server is the bot: webhook intake, the worker queue, run followers and the
// HTTP endpoints.
type Server struct {
	cfg      *Config
	logger   zerolog.Logger
	base     *handlers.Base
	registry metrics.Registry
	prom     *prometheus.Registry
	metrics  *serverMetrics
	sched    *dedupeScheduler
	handler  http.Handler
	ready    *readiness
	dash     *dashboard // dashboard.go
	live     *livePages // live.go
	pacer    *githubPacer
	// stopPruning ends the transcripts' pruning (store.go).
	stopPruning context.CancelFunc
	// stopRoutines stops the routines' scheduler (startRoutines);
	// routinesRead is closed once its first read of every installed
	// repository's routines has ended (Idle waits for it).
	stopRoutines func()
	routinesRead chan struct{}
}

// NewServer wires the bot around a backend.
func NewServer(cfg *Config, backend dispatch.Backend, logger zerolog.Logger) (*Server, error) {
	registry := metrics.NewRegistry()
	secrets := sanitize.NewSecrets()
	secrets.Add(slices.Collect(maps.Values(passEnv(cfg.PassEnv)))...)
	cc, err := newClientCreator(cfg, secrets, registry)
	if err != nil {
		return nil, err
	}
	tmpl, err := loadTemplates(cfg, logger)
	if err != nil {
		return nil, err
	}
	prom := prometheus.NewRegistry()
	pacer := newGitHubPacer(cfg.Ops.GitHubWritesPerMinute, prom, realClock{}, logger)
	dash, err := newDashboard(cfg, logger)
	if err != nil {
		return nil, err
	}
	ledger, err := budgetLedger(cfg, backend, dash.store)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logger: logger, pacer: pacer, registry: registry, prom: prom, ready: &readiness{backend: backend}, dash: dash,
		live: newLivePages(backend, dash.store, cfg.Retention, secrets, logger)}
	w := s.handlersWiring(pacer.creator(cc), backend, tmpl, secrets)
	var seen *seenLedger
	if ledger != nil {
		seen = &seenLedger{Ledger: ledger, limits: dash.store, now: w.Now, log: logger, seen: map[int64]bool{}}
		w.Budget = seen
	}
	dash.budgets = usageBudgets{policy: cfg.Settings.Budgets, ledger: ledger, now: w.Now}
	if s.base, err = handlers.NewBase(w); err != nil {
		return nil, err
	}
	base := s.base
	dash.routines = func(ctx context.Context) []handlers.RoutineView { return base.Routines.List(ctx, "") }
	s.metrics = newServerMetrics(s.prom, registry, backend, base)
	if seen != nil {
		s.prom.MustRegister(newBudgetCollector(seen, cfg.Settings.Budgets, base.Now, logger))
	}

	hooks := webhook.New(base.Entry())
	if s.sched, err = newDedupeScheduler(cfg, registry, s.metrics, hooks.MayAct); err != nil {
		return nil, err
	}
	hook := newHook(s, hooks.Handlers(), cfg.GitHub.App.WebhookSecret, s.sched) // hook.go
	s.handler = s.withLogger(newPublicHandler(s, hook))
	return s, nil
}

// handlersWiring is what the handlers are built with: the paced clients,
// the receipts and their transcripts, the run followers' logger, the
// queue-wait metric (s.metrics, made once the handlers are), and the
// routines' clock (SANDBOX_CLOCK_FILE, else the system's).
func (s *Server) handlersWiring(cc githubapp.ClientCreator, backend dispatch.Backend, tmpl *templates.Set, secrets *sanitize.Secrets) handlers.Wiring {
	w := handlers.Wiring{ClientCreator: cc, Settings: s.cfg.Settings, Backend: backend, Templates: tmpl, Secrets: secrets, Logger: s.logger,
		Now: time.Now, Receipts: s.dash.receiptsFor(s.cfg, cc),
		QueueWait: func(d time.Duration) { s.metrics.queueWait.Observe(d.Seconds()) }}
	if s.cfg.Retention > 0 {
		w.Receipts.Transcripts = &transcriptKeeper{store: s.dash.store, event: s.live.event, log: s.logger, maxLines: maxRunLines, closeWait: 10 * time.Second}
	}
	if s.cfg.Ops.ClockFile != "" {
		clock := newFileClock(s.cfg.Ops.ClockFile, s.logger)
		w.RoutinesNow, w.RoutinesAfterFunc = clock.Now, clock.AfterFunc
	}
	return w
}

// newClientCreator makes the GitHub clients: redacting the run's secrets
// from what they send, measured, logged at debug level.
func newClientCreator(cfg *Config, secrets *sanitize.Secrets, registry metrics.Registry) (githubapp.ClientCreator, error) {
	cc, err := githubapp.NewDefaultCachingClientCreator(cfg.GitHub,
		githubapp.WithClientUserAgent("sandbox-bot"),
		githubapp.WithClientTimeout(30*time.Second),
		githubapp.WithClientMiddleware(redactingMiddleware(secrets), githubapp.ClientMetrics(registry), githubapp.ClientLogging(zerolog.DebugLevel)),
	)
	if err != nil {
		return nil, fmt.Errorf("GitHub client: %w", err)
	}
	return cc, nil
}

// loadTemplates loads the reply templates with the operator's overrides
// (SANDBOX_TEMPLATES_DIR), each checked against the replies' samples.
func loadTemplates(cfg *Config, logger zerolog.Logger) (*templates.Set, error) {
	tmpl, err := templates.Load(cfg.TemplatesDir)
	if err == nil {
		err = tmpl.CheckOverrides(handlers.ReplySamples())
	}
	if err != nil {
		return nil, fmt.Errorf("SANDBOX_TEMPLATES_DIR: %w", err)
	}
	if o := tmpl.Overrides(); len(o) > 0 {
		logger.Info().Strs("templates", o).Str("dir", cfg.TemplatesDir).Msg("using template overrides")
	}
	return tmpl, nil
}

// newDedupeScheduler is the worker queue (cfg.QueueSize, cfg.Workers)
// behind the pre-filter (mayAct) and the redelivery dedupe.
func newDedupeScheduler(cfg *Config, registry metrics.Registry, m *serverMetrics, mayAct func(string, *fastjson.Value) bool) (*dedupeScheduler, error) {
	dedupe, err := lru.New(20000)
	if err != nil {
		return nil, err
	}
	return &dedupeScheduler{
		inner: githubapp.QueueAsyncScheduler(cfg.QueueSize, cfg.Workers,
			githubapp.WithSchedulingMetrics(registry),
			githubapp.WithAsyncErrorCallback(func(ctx context.Context, d githubapp.Dispatch, err error) {
				m.handlerErrors.WithLabelValues(d.EventType).Inc()
				zerolog.Ctx(ctx).Error().Err(err).Str("event", d.EventType).Msg("handler failed")
			}),
		),
		seen:    dedupe,
		metrics: m,
		mayAct:  mayAct,
	}, nil
}

// newPublicHandler is what the webhook listener of s serves, which faces
// the internet: deliveries (hook), liveness and a bare readiness bit, the
// sign-in and the live pages, the previews' hosts. The dashboard and
// metrics are on AdminHandler.
func newPublicHandler(s *Server, hook *hook) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+WebhookPath, s.guardIntake(s.cfg.Ops.MaxBodyReaders, s.limitBody(hook)))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { s.readyz(w, r, false) })
	s.dash.mountPublic(mux)
	var public http.Handler = mux
	if s.dash.signIn != nil {
		s.live.mount(mux, s.dash.signIn, s.dash.signedIn)
		if s.cfg.PreviewDomain != "" {
			o := newPreviewOrigin(s.live.preview, s.dash.signIn, s.cfg.PreviewDomain, s.cfg.PublicURL, s.cfg.GitHub.OAuth.ClientSecret)
			s.live.preview.origin = o
			public = o.previewHosts(mux)
		}
	}
	return public
}

// Base exposes the handlers' shared state (tests, the CLI).
func (s *Server) Base() *handlers.Base { return s.base }

// Handler is the HTTP handler of the bot.
func (s *Server) Handler() http.Handler { return s.handler }

func statusLabel(handled bool) string {
	if handled {
		return "accepted"
	}
	return "ignored"
}

func (s *Server) withLogger(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(s.logger.WithContext(r.Context())))
	})
}

// limitBody rejects bodies over GitHub's limit before reading them whole.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxPayloadBytes {
			s.metrics.rejected.WithLabelValues("too_large").Inc()
			http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxPayloadBytes)
		next.ServeHTTP(w, r)
	})
}

// onWebhookError maps go-githubapp's errors to status codes: a bad
// signature is 401, an oversized body 413, a malformed one 400, a full
// queue 503. Each is counted.
func (s *Server) onWebhookError(w http.ResponseWriter, r *http.Request, err error) {
	log := zerolog.Ctx(r.Context())
	var ve githubapp.ValidationError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.metrics.rejected.WithLabelValues("too_large").Inc()
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
	case errors.As(err, &ve) && isSignatureError(ve.Cause):
		s.metrics.rejected.WithLabelValues("bad_signature").Inc()
		log.Warn().Err(ve.Cause).Msg("webhook signature check failed")
		http.Error(w, "signature check failed", http.StatusUnauthorized)
	case errors.As(err, &ve):
		s.metrics.rejected.WithLabelValues("malformed").Inc()
		log.Debug().Err(ve.Cause).Msg("malformed webhook")
		http.Error(w, "invalid webhook headers or payload", http.StatusBadRequest)
	case errors.Is(err, githubapp.ErrCapacityExceeded):
		s.metrics.rejected.WithLabelValues("queue_full").Inc()
		log.Warn().Msg("queue full; dropping webhook (GitHub can redeliver it)")
		http.Error(w, "queue full", http.StatusServiceUnavailable)
	default:
		s.metrics.rejected.WithLabelValues("error").Inc()
		log.Error().Err(err).Msg("webhook error")
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
	}
}

func isSignatureError(err error) bool {
	if err == nil {
		return false
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "signature") || strings.Contains(msg, "HMAC")
}

// dedupeScheduler drops deliveries this replica has already queued: GitHub
// redelivers with the same X-GitHub-Delivery. Across replicas, deterministic
// task ids and create-only submission do the same job.
//
// It also counts deliveries in flight (queued or being handled), which
// Drain waits on: go-githubapp's own gauges read zero for a moment while a
// worker has taken an event off the queue but not yet marked itself busy.
type dedupeScheduler struct {
	inner    githubapp.Scheduler
	seen     *lru.Cache
	metrics  *serverMetrics
	inflight atomic.Int64
	// mayAct and parsers are the pre-filter the hook runs (intake.go).
	mayAct  func(eventType string, v *fastjson.Value) bool
	parsers fastjson.ParserPool
}

// doneHandler calls done when the wrapped handler returns.
type doneHandler struct {
	githubapp.EventHandler
	done func()
}

func (h doneHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	defer h.done()
	return h.EventHandler.Handle(ctx, eventType, deliveryID, payload)
}

func (d *dedupeScheduler) Schedule(ctx context.Context, dispatch githubapp.Dispatch) error {
	if dispatch.DeliveryID != "" {
		if ok, _ := d.seen.ContainsOrAdd(dispatch.DeliveryID, struct{}{}); ok {
			d.metrics.rejected.WithLabelValues("duplicate").Inc()
			zerolog.Ctx(ctx).Info().Msg("duplicate delivery ignored")
			return nil
		}
	}
	d.inflight.Add(1)
	dispatch.Handler = doneHandler{EventHandler: dispatch.Handler, done: func() { d.inflight.Add(-1) }}
	err := d.inner.Schedule(ctx, dispatch)
	if err != nil {
		d.inflight.Add(-1)
		// Not queued: let GitHub's redelivery through next time.
		d.seen.Remove(dispatch.DeliveryID)
	}
	return err
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"status":"ok","backend":%q,"queued":%d,"workers_busy":%d,"runs_followed":%d}`+"\n",
		s.base.Backend.Name(), s.gauge(githubapp.MetricsKeyQueueLength), s.gauge(githubapp.MetricsKeyActiveWorkers), len(s.base.Runs.Active()))
}

func (s *Server) gauge(name string) int64 {
	if g, ok := s.registry.Get(name).(metrics.Gauge); ok {
		return g.Value()
	}
	return 0
}

var dashboardTmpl = template.Must(template.New("dash").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>sandbox-bot</title>
<style>body{font:14px system-ui;margin:2em}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}</style>
</head><body><h1>sandbox-bot</h1>
<p>Backend <b>{{.Backend}}</b> · queue {{.Queued}} · busy workers {{.Busy}} · <a href="/dashboard">receipts of ended runs</a></p>
<table><tr><th>Task</th><th>Mode</th><th>Repository</th><th>#</th><th>State</th><th>Attempt</th><th>Started</th></tr>
{{range .Runs}}<tr><td><code>{{.Meta.TaskID}}</code></td><td>{{.Meta.Mode}}</td><td>{{.Meta.Repo}}</td><td>{{.Meta.Number}}</td><td>{{.State}}</td><td>{{.Meta.Attempt}}</td><td>{{if not .StartedAt.IsZero}}{{.StartedAt.Format "2006-01-02 15:04:05"}}{{end}}</td></tr>
{{else}}<tr><td colspan="7">No runs.</td></tr>{{end}}
</table></body></html>`))

// dashboard lists the runs the backend knows, newest first.
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	runs, err := s.base.Backend.List(r.Context())
	if err != nil {
		http.Error(w, "list runs: "+err.Error(), http.StatusBadGateway)
		return
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedAt.After(runs[j].StartedAt) })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = dashboardTmpl.Execute(w, map[string]any{
		"Backend": s.base.Backend.Name(), "Queued": s.gauge(githubapp.MetricsKeyQueueLength),
		"Busy": s.gauge(githubapp.MetricsKeyActiveWorkers), "Runs": runs,
	})
}

// Start checks the backend (logging what is not ready) and reconciles runs
// left from a previous life of the bot.
func (s *Server) Start(ctx context.Context) error {
	// Handlers read the identity again when this fails (GitHub down).
	if login, err := s.base.LoadIdentity(ctx); err != nil {
		s.logger.Error().Err(err).Msg("read the App's bot account; markers and agent PRs are checked once it is known")
	} else {
		s.logger.Info().Str("bot", login).Msg("the App's bot account")
		s.checkSlug(login)
	}
	s.ready.check(ctx, s.logger)
	if s.stopPruning == nil {
		var prune context.Context
		prune, s.stopPruning = context.WithCancel(context.Background())
		go pruneTranscripts(prune, s.dash.store, s.cfg.Retention, s.logger)
	}
	s.startRoutines(ctx)
	return s.base.Reconcile(ctx)
}

// Routines lists the routines this replica knows, of repo ("" for every
// repository), with their next tick, last run and its result.
func (s *Server) Routines(ctx context.Context, repo string) []handlers.RoutineView {
	return s.base.Routines.List(ctx, repo)
}

// startRoutines reads every installed repository's routines and starts
// their scheduler, in the background: a thousand repositories' files are
// not read before the bot answers webhooks.
func (s *Server) startRoutines(ctx context.Context) {
	if s.stopRoutines != nil {
		return
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rctx = s.logger.With().Str("part", "routines").Logger().WithContext(rctx)
	done := make(chan struct{})
	s.routinesRead = done
	go func() {
		defer close(done)
		s.base.Routines.Start(rctx)
	}()
	s.stopRoutines = func() {
		cancel()
		<-done
		s.base.Routines.Stop()
	}
}

// Drain waits until the webhook queue is empty and no worker is busy, or
// ctx ends. Call it after the HTTP server stopped accepting requests.
func (s *Server) Drain(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if s.sched.inflight.Load() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain webhook queue: %w (%d deliveries still queued or being handled)", ctx.Err(), s.sched.inflight.Load())
		case <-t.C:
		}
	}
}

// pacerDrain bounds how long a stopping bot sends the progress updates
// its pacer kept.
const pacerDrain = 10 * time.Second

// Stop stops following runs; they go on in the backend and a restarted bot
// reconciles them.
func (s *Server) Stop() {
	if s.stopRoutines != nil {
		s.stopRoutines()
	}
	s.base.Stop()
	// The progress updates the pacer kept go out at the pace, for a while.
	ctx, cancel := context.WithTimeout(context.Background(), pacerDrain)
	defer cancel()
	if err := s.pacer.close(ctx); err != nil {
		s.logger.Warn().Err(err).Msg("GitHub writes")
	}
	if s.stopPruning != nil {
		s.stopPruning()
	}
	s.live.close()
	if err := s.dash.close(); err != nil {
		s.logger.Warn().Err(err).Msg("close the receipts store")
	}
}
