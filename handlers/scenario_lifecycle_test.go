package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

// gatedBackend holds Submit until released, to catch the bot mid-handler.
type gatedBackend struct {
	*backendtest.Memory
	gate chan struct{}
}

func (g *gatedBackend) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
	<-g.gate
	return g.Memory.Submit(ctx, spec)
}

func TestDrainWaitsForQueuedWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	gated := &gatedBackend{Memory: h.backend, gate: make(chan struct{})}
	h.stop()
	h.startWith(gated, nil)
	n := h.gh.AddIssue(testRepo, writer, "x", "")
	h.label(n, writer, "d-drain")
	h.gh.WaitFor(5*time.Second, "the handler reaches Submit", func() bool { return h.gh.CountRequests("POST /app/installations/") == 1 })

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- h.srv.Drain(ctx)
	}()
	select {
	case err := <-done:
		t.Fatalf("Drain returned (%v) while a handler was still running", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(gated.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := len(h.backend.Specs()); got != 1 {
		t.Fatalf("the drained handler must have finished its submit; runs: %d", got)
	}
}

func TestTokenIsRefreshedWhileRunLives(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, map[string]string{"SANDBOX_TOKEN_REFRESH": "50ms"})
	n := h.gh.AddIssue(testRepo, writer, "x", "")
	h.label(n, writer, "d-refresh")
	spec := h.waitSubmitted(1)[0]
	h.gh.WaitFor(5*time.Second, "two refreshed tokens", func() bool { return len(h.backend.Tokens(spec.Order.TaskID)) >= 3 })
	toks := h.backend.Tokens(spec.Order.TaskID)
	seen := map[string]bool{}
	for _, tok := range toks {
		if seen[tok] {
			t.Fatalf("refresh delivered the same token twice: %v", toks)
		}
		seen[tok] = true
	}
	for _, minted := range h.gh.Tokens() {
		if seen[minted.Value] && (minted.Permissions["contents"] != "read" || len(minted.Permissions) != 1) {
			t.Errorf("a plan run's refreshed token has permissions %v, want contents:read only", minted.Permissions)
		}
	}
	// A replaced token is revoked a grace period after its successor was
	// delivered, while the run goes on.
	h.gh.WaitRevoked(5*time.Second, toks[0], toks[1])
	end := time.Now()
	var live []string
	for _, v := range h.backend.Tokens(spec.Order.TaskID) {
		if !h.token(v).Revoked() {
			live = append(live, v)
		}
	}
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "p"})
	h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "Plan") })
	// The run's end revokes every token it was given, and refreshing stops:
	// once the bot is stopped, nothing minted for the run is left valid.
	for _, tok := range h.gh.WaitRevoked(5*time.Second, live...) {
		if tok.RevokedAt.Before(end) {
			t.Errorf("a token the sandbox held was revoked before the run ended")
		}
	}
	h.gh.WaitRevoked(5*time.Second, h.backend.Tokens(spec.Order.TaskID)...)
	h.stop()
	delivered := h.backend.Tokens(spec.Order.TaskID)
	for _, tok := range h.sandboxTokens() {
		if !tok.Revoked() {
			t.Errorf("a token minted for the run (%d delivered) is still valid after it ended", len(delivered))
		}
	}
}

// Progress reaches GitHub at most once per interval, however chatty the
// agent: one progress comment, then only the final edit.
func TestProgressIsThrottled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, map[string]string{"SANDBOX_PROGRESS_INTERVAL": "1h"})
	n := h.gh.AddIssue(testRepo, writer, "x", "")
	h.label(n, writer, "d-progress")
	spec := h.waitSubmitted(1)[0]
	for i := 1; i <= 50; i++ {
		h.backend.Emit(spec.Order.TaskID, dispatch.Progress{Stage: "agent", Message: "tool call", Step: i, ToolCalls: i, CostUSD: float64(i) / 100})
	}
	h.waitComment(n, "progress comment", func(c string) bool { return strings.Contains(c, `"kind":"progress"`) })
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "p"})
	h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.idle() // the progress comment's last edit follows the plan
	var edits, creates int
	for _, r := range h.gh.Requests() {
		if r.Method == "PATCH" && strings.Contains(r.Path, "/issues/comments/") {
			edits++
		}
		if r.Method == "POST" && strings.HasSuffix(r.Path, "/comments") && strings.Contains(string(r.Body), `\"kind\":\"progress\"`) {
			creates++
		}
	}
	if creates != 1 || edits != 1 {
		t.Errorf("50 progress lines within one interval: want 1 progress comment and 1 final edit, got %d and %d", creates, edits)
	}
}
