package runner

import (
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// StopReason says why the runner stopped the agent before it ended.
type StopReason string

// Why the agent was stopped.
const (
	StopNone        StopReason = ""
	StopHung        StopReason = "hung"     // no event for the inactivity timeout
	StopBudget      StopReason = "budget"   // cost passed the cap
	StopInterrupted StopReason = "canceled" // the run's context ended (SIGTERM, timeout)
)

// agentSpec is one invocation of the agent.
type agentSpec struct {
	Stage     string // progress stage: agent, repair, rebase
	Prompt    string
	SessionID string
	ReadOnly  bool
	// Model replaces the configuration's model for this pass (review).
	Model string
	// CostCap stops the agent when this invocation's cost passes it; 0 is
	// no cap.
	CostCap float64
	// Images go with the prompt (the first of a fresh session).
	Images []harness.Image
}

// agentOutcome is what one invocation did.
type agentOutcome struct {
	SessionID   string
	FinalText   string
	Usage       dispatch.TokenUsage
	Tools       map[string]int // calls by tool name
	ExitErr     error
	Stop        StopReason
	Diagnostic  *dispatch.Diagnostic
	Stalls      []string
	Errors      []string
	ParseErrors int
	StderrTail  string
}

// OK reports whether the agent ended by itself without reporting an error.
func (o *agentOutcome) OK() bool {
	return o.Stop == StopNone && o.ExitErr == nil && len(o.Errors) == 0
}

// Problem describes why the outcome is not OK, for the receipt.
func (o *agentOutcome) Problem() string {
	switch {
	case len(o.Errors) > 0:
		return "the agent reported: " + o.Errors[len(o.Errors)-1]
	case o.ExitErr != nil:
		msg := "the agent exited with " + o.ExitErr.Error()
		if o.StderrTail != "" {
			msg += ": " + o.StderrTail
		}
		return msg
	}
	return ""
}

// agentStats are an invocation's counters, for progress lines.
type agentStats struct {
	Steps     int     // steps started
	Completed int     // steps finished
	ToolCalls int     // tool calls so far
	CostUSD   float64 // this invocation's cost so far
	Tokens    int64   // input + output tokens so far
}
