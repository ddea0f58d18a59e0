package app

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/loadtest"
)

// The webhook endpoint answers each kind of delivery as go-githubapp's
// dispatcher did, with the pre-filter's 202 besides, and counts each; only
// the deliveries a handler acts on reach the queue. None of these calls
// GitHub.
func TestWebhookEndpointAnswers(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Options{})
	srv := newIntakeServer(t, gh.URL(), nil, io.Discard)
	labeled := readPayload(t, "issues.labeled.json") // label "bug"
	// An approval on an agent PR reaches a worker, which asks GitHub
	// nothing about it (an inline comment there would start a batch).
	review := readPayload(t, "pull_request_review.submitted.json")
	var m map[string]any
	if err := json.Unmarshal(review, &m); err != nil {
		t.Fatal(err)
	}
	approvedOnAgentPR(m)
	agentReview, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	form := []byte("payload=" + url.QueryEscape(string(labeled)))

	for _, c := range []struct {
		name, event, contentType string
		body                     []byte
		sig                      string // default: the body's
		want                     int
		sample                   string // counted in /metrics
	}{
		{name: "ping", event: "ping", body: []byte(`{"zen":"Keep it logically awesome."}`), want: http.StatusOK,
			sample: `sandbox_bot_webhook_deliveries_total{event="ping",status="ignored"}`},
		{name: "event without a handler", event: "star", body: []byte(`{"action":"created"}`), want: http.StatusAccepted,
			sample: `sandbox_bot_webhook_deliveries_total{event="star",status="ignored"}`},
		{name: "filtered", event: "issues", body: labeled, want: http.StatusAccepted,
			sample: `sandbox_bot_webhook_deliveries_total{event="issues",status="filtered"}`},
		{name: "form-encoded, filtered", event: "issues", contentType: "application/x-www-form-urlencoded", body: form, want: http.StatusAccepted,
			sample: `sandbox_bot_webhook_deliveries_total{event="issues",status="filtered"}`},
		{name: "queued", event: "pull_request_review", body: agentReview, want: http.StatusOK,
			sample: `sandbox_bot_webhook_deliveries_total{event="pull_request_review",status="accepted"}`},
		{name: "no event type", body: labeled, want: http.StatusBadRequest, sample: `sandbox_bot_webhook_rejected_total{reason="malformed"}`},
		{name: "not JSON", event: "issues", body: []byte(`{"action": "labeled", "issue": `), want: http.StatusBadRequest,
			sample: `sandbox_bot_webhook_rejected_total{reason="malformed"}`},
		{name: "wrong signature", event: "issues", body: labeled, sig: loadtest.Sign(labeled, []byte("not-the-secret")), want: http.StatusUnauthorized,
			sample: `sandbox_bot_webhook_rejected_total{reason="bad_signature"}`},
	} {
		before := metricSum(t, srv, c.sample)
		req := httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		if c.event != "" {
			req.Header.Set("X-GitHub-Event", c.event)
		}
		req.Header.Set("X-GitHub-Delivery", "hook-"+c.name)
		sig := c.sig
		if sig == "" {
			sig = loadtest.Sign(c.body, []byte(testSecret))
		}
		req.Header.Set(loadtest.SignatureHeader, sig)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: answered %d %q, want %d", c.name, rec.Code, rec.Body.String(), c.want)
		}
		if got := metricSum(t, srv, c.sample); got != before+1 {
			t.Errorf("%s: %s went from %v to %v, want one more", c.name, c.sample, before, got)
		}
	}
	drainServer(t, srv)
	if n := len(gh.Requests()); n != 0 {
		t.Errorf("the fake GitHub received %d requests; none of these deliveries asks it anything", n)
	}
}
