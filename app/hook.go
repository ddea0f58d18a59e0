package app

import (
	"bytes"
	"errors"
	"mime"
	"net/http"
	"sync"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// bodyPrealloc caps how much of a delivery's Content-Length is allocated
// before its bytes arrive: GitHub's payloads are mostly under 100 KB, and a
// client that only claims 25 MB must not get it reserved.
const bodyPrealloc = 1 << 20

// hook is the webhook endpoint: go-githubapp's event dispatcher, cut to
// what the bot needs on the path that answers GitHub. Per delivery it reads
// the body once into a buffer of the announced size (io.ReadAll, which
// go-github's ValidatePayload uses, grows its buffer a dozen times for a
// 20 KB payload), checks the signature, and asks the scheduler, whose
// pre-filter answers most events 202 at once. The per-delivery logger and
// the "Received webhook event" line are only for deliveries that are
// queued; the others are counted in /metrics and logged at debug level.
type hook struct {
	s        *Server
	secret   []byte
	handlers map[string]githubapp.EventHandler
	sched    *dedupeScheduler
	// bodies holds read buffers (*bytes.Buffer) of deliveries that were
	// answered without being queued, for the next ones: most deliveries
	// are filtered, so most reads then allocate nothing.
	bodies sync.Pool
}

func newHook(s *Server, handlers []githubapp.EventHandler, secret string, sched *dedupeScheduler) *hook {
	h := &hook{s: s, secret: []byte(secret), handlers: map[string]githubapp.EventHandler{}, sched: sched}
	// The first handler of an event type wins, as in go-githubapp.
	for i := len(handlers) - 1; i >= 0; i-- {
		for _, event := range handlers[i].Handles() {
			h.handlers[event] = handlers[i]
		}
	}
	return h
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	event, delivery := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
	if event == "" {
		h.s.onWebhookError(w, r, githubapp.ValidationError{DeliveryID: delivery, Cause: errors.New("missing event type")})
		return
	}
	buf := h.buffer()
	queued := false
	defer func() {
		if !queued && buf.Cap() <= bodyPrealloc+bytes.MinRead {
			h.bodies.Put(buf)
		}
	}()
	payload, err := h.validate(r, buf)
	if err != nil {
		h.s.onWebhookError(w, r, githubapp.ValidationError{EventType: event, DeliveryID: delivery, Cause: err})
		return
	}
	handler, ok := h.handlers[event]
	if !ok {
		h.s.metrics.deliveries.WithLabelValues(event, statusLabel(false)).Inc()
		if event != "ping" {
			w.WriteHeader(http.StatusAccepted)
		}
		return
	}
	wanted, err := h.sched.admit(event, payload)
	if err != nil {
		h.s.onWebhookError(w, r, githubapp.ValidationError{EventType: event, DeliveryID: delivery, Cause: err})
		return
	}
	if !wanted {
		zerolog.Ctx(r.Context()).Debug().Str(githubapp.LogKeyEventType, event).Str(githubapp.LogKeyDeliveryID, delivery).Msg("no handler acts on this event; answered 202")
		h.s.metrics.deliveries.WithLabelValues(event, "filtered").Inc()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	// A queued delivery's handler logs with the event and delivery id, as
	// go-githubapp's dispatcher gives it.
	log := zerolog.Ctx(r.Context()).With().Str(githubapp.LogKeyEventType, event).Str(githubapp.LogKeyDeliveryID, delivery).Logger()
	log.Info().Msg("Received webhook event")
	ctx := log.WithContext(r.Context())
	// The payload is the worker's now (or the dedupe's drop's): its buffer
	// is not reused.
	queued = true
	if err := h.sched.Schedule(ctx, githubapp.Dispatch{Handler: handler, EventType: event, DeliveryID: delivery, Payload: payload}); err != nil {
		h.s.onWebhookError(w, r.WithContext(ctx), err)
		return
	}
	h.s.metrics.deliveries.WithLabelValues(event, statusLabel(true)).Inc()
	w.WriteHeader(http.StatusOK)
}

func (h *hook) buffer() *bytes.Buffer {
	if b, ok := h.bodies.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// validate reads the body into buf and checks its X-Hub-Signature-256
// (guardIntake has made sure there is one), returning the JSON payload.
// Form-encoded deliveries take go-github's own path.
func (h *hook) validate(r *http.Request, buf *bytes.Buffer) ([]byte, error) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	sig := r.Header.Get(signature256Header)
	if ct != "application/json" {
		return github.ValidatePayloadFromBody(ct, r.Body, sig, h.secret)
	}
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, bodyPrealloc)) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return nil, err
	}
	if err := github.ValidateSignature(sig, buf.Bytes(), h.secret); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
