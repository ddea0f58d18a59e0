package handlers

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

// A backend that cannot keep sessions (Nomad) tells the execute run why it
// starts fresh; a plan run without a plan task hands over nothing.
func TestSessionHandoffWithoutAKeeper(t *testing.T) {
	t.Parallel()
	b := agentRun{c: &core{Wiring: &Wiring{Backend: struct{ dispatch.Backend }{backendtest.NewMemory()}}}}
	h := b.sessionHandoff(context.Background(), "T-00000001")
	if h == nil || h.FromTask != "T-00000001" || len(h.Archive) != 0 || !strings.Contains(h.Missing, "the memory backend does not carry agent sessions") {
		t.Fatalf("handoff = %+v", h)
	}
	if h := b.sessionHandoff(context.Background(), ""); h != nil {
		t.Fatalf("no plan task: handoff = %+v", h)
	}
}

// The PR body shows only a real task id and a one-line, redacted note.
func TestVetSession(t *testing.T) {
	t.Parallel()
	s := vetSession(&dispatch.SessionReport{Resumed: true, From: "T-0000000](http://x)", Note: "fresh: a | b `c`\nSECRET"},
		func(s string) string { return strings.ReplaceAll(s, "SECRET", "[REDACTED]") })
	if s.Resumed || s.From != "" || s.Note != "fresh: a / b 'c' [REDACTED]" {
		t.Fatalf("vetted = %+v", s)
	}
}
