package runner

import (
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

func TestTallyCountsStepsToolsTokensAndCost(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ta := newTally("", t0)
	evs := []harness.Event{
		{Type: harness.EventSession, SessionID: "ses_1"},
		{Type: harness.EventStepStart},
		{Type: harness.EventToolUse, Tool: "edit"},
		{Type: harness.EventToolUse, Tool: "bash"},
		{Type: harness.EventStepFinish, Tokens: harness.Tokens{Input: 100, Output: 10, CacheRead: 5}, CostUSD: 0.25},
		{Type: harness.EventStepStart},
		{Type: harness.EventText, Text: "first"},
		{Type: harness.EventText, Text: "  "},
		{Type: harness.EventText, Text: "second"},
		{Type: harness.EventStepFinish, Tokens: harness.Tokens{Input: 50, Output: 20, Reasoning: 7}, CostUSD: 0.5},
	}
	for i, ev := range evs {
		ta.add(ev, t0.Add(time.Duration(i+1)*time.Second))
	}
	st := ta.stats()
	if st.Steps != 2 || st.Completed != 2 || st.ToolCalls != 2 || st.CostUSD != 0.75 || st.Tokens != 180 {
		t.Fatalf("stats = %+v, want 2 steps, 2 completed, 2 tool calls, $0.75, 180 tokens", st)
	}
	u := ta.usage()
	if u.Input != 150 || u.Output != 30 || u.Reasoning != 7 || u.CacheRead != 5 || u.Steps != 2 || u.TotalCostUSD != 0.75 {
		t.Fatalf("usage = %+v", u)
	}
	if got := ta.finalText(); got != "first\n\nsecond" {
		t.Fatalf("final text = %q, want the current step's texts joined", got)
	}
	if ta.sessionID != "ses_1" {
		t.Fatalf("session = %q", ta.sessionID)
	}
	d := ta.diagnostic(1, t0.Add(30*time.Second))
	if d.LastEventType != string(harness.EventStepFinish) || d.CurrentStep != 2 || d.CompletedSteps != 2 || d.CostSoFarUSD != 1.75 || d.IdleSeconds != 20 {
		t.Fatalf("diagnostic = %+v", d)
	}
}

func TestTallyTakesTheLargerOfTotalsAndSums(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	ta := newTally("given", t0)
	// Claude Code style: a result with session totals and a running total
	// cost, after per-step numbers that undercount.
	ta.add(harness.Event{Type: harness.EventStepFinish, Tokens: harness.Tokens{Input: 10, Output: 90}, CostUSD: 0.1}, t0)
	ta.add(harness.Event{Type: harness.EventResult, Tokens: harness.Tokens{Input: 40, Output: 5}, CostUSD: 0.3, CostIsTotal: true, Text: "done", SessionID: "other"}, t0)
	u := ta.usage()
	if u.Input != 40 || u.Output != 90 || u.TotalCostUSD != 0.3 {
		t.Fatalf("usage = %+v, want field-wise max (40 in, 90 out) and the total cost 0.3", u)
	}
	if ta.finalText() != "done" {
		t.Fatalf("final text = %q, want the result's text", ta.finalText())
	}
	if ta.sessionID != "given" {
		t.Fatalf("session = %q: a session given at start is kept unless a session event names another", ta.sessionID)
	}
}

func TestTallyKeepsErrorsStallsAndTheStderrTail(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	ta := newTally("", t0)
	if ta.gotEvent || ta.lastType != "none" {
		t.Fatalf("a new tally has seen nothing: %+v", ta)
	}
	ta.add(harness.Event{Type: harness.EventError, Text: "rate limited"}, t0)
	ta.add(harness.Event{Type: harness.EventStall, Text: "bash: rejected"}, t0)
	for i := 0; i < stderrKeep+5; i++ {
		ta.stderrLine(string(rune('a' + i)))
	}
	ta.parseError()
	if len(ta.errors) != 1 || ta.errors[0] != "rate limited" || len(ta.stalls) != 1 || ta.parseErrors != 1 {
		t.Fatalf("errors %q stalls %q parse errors %d", ta.errors, ta.stalls, ta.parseErrors)
	}
	if len(ta.stderr) != stderrKeep || ta.stderr[0] != "f" {
		t.Fatalf("stderr tail = %q, want the last %d lines", ta.stderr, stderrKeep)
	}
	if !ta.gotEvent || ta.idle(t0.Add(time.Minute)) != time.Minute {
		t.Fatalf("idle = %s", ta.idle(t0.Add(time.Minute)))
	}
}
