package runner

import (
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// tally accumulates what one agent invocation's events say: steps, tool
// calls, tokens, cost, its final text, its errors and the last event seen.
// It does no I/O and reads no clock (the caller passes the time), so it is
// tested without processes.
type tally struct {
	start     time.Time
	lastAt    time.Time
	lastType  string
	gotEvent  bool
	sessionID string

	steps, completed, toolCalls int
	tools                       map[string]int // calls by tool name, for the receipt

	stepText strings.Builder // the text of the current step
	lastText string          // the latest non-empty text: the final answer
	lastLine bool            // the text so far ends with a plain-text line

	// Harnesses report cost either per step (summed) or as a running
	// total; the larger of the two is the invocation's cost.
	deltaCost, totalCost float64
	// Likewise tokens: per-step sums, or a result's session totals.
	stepTok, resultTok harness.Tokens

	errors, stalls []string
	parseErrors    int
	stderr         []string // the last stderrKeep lines
}

const stderrKeep = 20

func newTally(sessionID string, now time.Time) *tally {
	return &tally{start: now, lastAt: now, lastType: "none", sessionID: sessionID}
}

// add records one event seen at now.
func (t *tally) add(ev harness.Event, now time.Time) {
	t.gotEvent = true
	t.lastAt = now
	t.lastType = string(ev.Type)
	if ev.SessionID != "" && (ev.Type == harness.EventSession || t.sessionID == "") {
		t.sessionID = ev.SessionID
	}
	switch ev.Type {
	case harness.EventStepStart:
		t.steps++
		t.stepText.Reset()
	case harness.EventText:
		// Lines of a plain-text agent join with one newline (blank lines
		// kept), parts of a structured one with a blank line.
		if ev.Line && t.stepText.Len() > 0 {
			sep := "\n\n"
			if t.lastLine {
				sep = "\n"
			}
			t.stepText.WriteString(sep + ev.Text)
			t.lastText, t.lastLine = t.stepText.String(), true
		} else if strings.TrimSpace(ev.Text) != "" {
			if t.stepText.Len() > 0 {
				t.stepText.WriteString("\n\n")
			}
			t.stepText.WriteString(ev.Text)
			t.lastText, t.lastLine = t.stepText.String(), ev.Line
		}
	case harness.EventStepFinish:
		t.completed++
		t.stepTok = addTokens(t.stepTok, ev.Tokens)
		t.addCost(ev)
	case harness.EventResult:
		t.resultTok = maxTokens(t.resultTok, ev.Tokens)
		t.addCost(ev)
		if strings.TrimSpace(ev.Text) != "" {
			t.lastText = ev.Text
		}
	case harness.EventToolUse:
		t.toolCalls++
		t.countTool(ev.Tool)
	case harness.EventError:
		t.errors = append(t.errors, ev.Text)
	case harness.EventStall:
		t.stalls = append(t.stalls, ev.Text)
	}
}

// maxToolNames bounds the receipt's tool table: the model chooses the
// names it calls, so a hostile one could otherwise grow it without end.
const maxToolNames = 64

func (t *tally) countTool(name string) {
	if name == "" {
		return
	}
	if t.tools == nil {
		t.tools = map[string]int{}
	}
	if _, seen := t.tools[name]; !seen && len(t.tools) >= maxToolNames {
		name = "other"
	}
	t.tools[name]++
}

func (t *tally) addCost(ev harness.Event) {
	if ev.CostIsTotal {
		t.totalCost = ev.CostUSD
	} else {
		t.deltaCost += ev.CostUSD
	}
}

// stderrLine keeps a line of the agent's stderr for the receipt.
func (t *tally) stderrLine(l string) { t.stderr = appendTail(t.stderr, l, stderrKeep) }

// parseError counts a stdout line that did not parse.
func (t *tally) parseError() { t.parseErrors++ }

func (t *tally) cost() float64 { return max(t.deltaCost, t.totalCost) }

func (t *tally) tokens() harness.Tokens { return maxTokens(t.stepTok, t.resultTok) }

// idle is how long no event came, at now.
func (t *tally) idle(now time.Time) time.Duration { return now.Sub(t.lastAt) }

// stats are the counters a progress line shows.
func (t *tally) stats() agentStats {
	tok := t.tokens()
	return agentStats{Steps: t.steps, Completed: t.completed, ToolCalls: t.toolCalls, CostUSD: t.cost(), Tokens: tok.Input + tok.Output}
}

// diagnostic is the watchdog's account of where the agent was, with the
// run's cost before this invocation added.
func (t *tally) diagnostic(costBefore float64, now time.Time) *dispatch.Diagnostic {
	return &dispatch.Diagnostic{
		LastEventType:  t.lastType,
		LastEventAt:    t.lastAt.UTC(),
		CurrentStep:    t.steps,
		CompletedSteps: t.completed,
		CostSoFarUSD:   costBefore + t.cost(),
		IdleSeconds:    t.idle(now).Seconds(),
	}
}

// usage is the invocation's token usage for the receipt.
func (t *tally) usage() dispatch.TokenUsage {
	tok := t.tokens()
	return dispatch.TokenUsage{
		Input: tok.Input, Output: tok.Output, Reasoning: tok.Reasoning,
		CacheRead: tok.CacheRead, CacheWrite: tok.CacheWrite,
		TotalCostUSD: t.cost(), Steps: t.completed,
	}
}

// finalText is the agent's last words: a plan, a PR summary.
func (t *tally) finalText() string { return strings.TrimSpace(t.lastText) }

func appendTail(lines []string, l string, n int) []string {
	lines = append(lines, l)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func addTokens(a, b harness.Tokens) harness.Tokens {
	return harness.Tokens{
		Input: a.Input + b.Input, Output: a.Output + b.Output, Reasoning: a.Reasoning + b.Reasoning,
		CacheRead: a.CacheRead + b.CacheRead, CacheWrite: a.CacheWrite + b.CacheWrite,
	}
}

// maxTokens takes the larger of per-step sums and a harness's session
// totals field by field: some harnesses report only one of the two.
func maxTokens(a, b harness.Tokens) harness.Tokens {
	return harness.Tokens{
		Input: max(a.Input, b.Input), Output: max(a.Output, b.Output), Reasoning: max(a.Reasoning, b.Reasoning),
		CacheRead: max(a.CacheRead, b.CacheRead), CacheWrite: max(a.CacheWrite, b.CacheWrite),
	}
}

// addTools adds an invocation's tool counts to the receipt's, within the
// same bound on distinct names as one invocation's.
func addTools(res *dispatch.Result, tools map[string]int) {
	for name, n := range tools {
		if res.Tools == nil {
			res.Tools = map[string]int{}
		}
		if _, seen := res.Tools[name]; !seen && len(res.Tools) >= maxToolNames {
			name = "other"
		}
		res.Tools[name] += n
	}
}
