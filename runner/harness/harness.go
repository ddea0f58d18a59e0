// Package harness puts the agent CLIs (OpenCode, Claude Code, any command)
// behind one interface: how to start the agent for a prompt, and how to read
// its output into one stream of events.
package harness

import (
	"os/exec"
	"time"
)

// EventType is the kind of an agent event, common to every harness.
type EventType string

// The event types every harness maps its output to.
const (
	EventSession    EventType = "session"     // the agent's session id is known
	EventStepStart  EventType = "step_start"  // a model turn began
	EventToolUse    EventType = "tool_use"    // the agent called a tool
	EventText       EventType = "text"        // the agent said something
	EventStepFinish EventType = "step_finish" // a model turn ended, with tokens and cost
	EventError      EventType = "error"       // the agent reported an error
	EventResult     EventType = "result"      // the agent finished (final text, totals)
	EventStall      EventType = "stall"       // stderr says an operation was auto-rejected
)

// Tokens of one step (or, on EventResult, of the whole session).
type Tokens struct {
	Input      int64
	Output     int64
	Reasoning  int64
	CacheRead  int64
	CacheWrite int64
}

// Event is one thing the agent did, parsed from its output.
type Event struct {
	Type      EventType
	Time      time.Time
	SessionID string
	Tool      string // EventToolUse: tool name
	ToolInput string // EventToolUse: compact JSON of the input, for logs
	Text      string // EventText, EventResult: text; EventError, EventStall: message
	Tokens    Tokens
	// CostUSD is this step's cost (EventStepFinish) or the session's total
	// (EventResult, where the harness reports one).
	CostUSD float64
	// CostIsTotal marks CostUSD as a running total instead of a delta.
	CostIsTotal bool
	// Line marks Text as one line of a plain-text agent's output (blank
	// lines included), which the runner joins with single newlines so the
	// text stays as written; other text events are parts, joined by a
	// blank line.
	Line bool
}

// Request is one invocation of the agent.
type Request struct {
	Dir    string   // working directory (the repo checkout or task dir)
	Prompt string   // the rendered prompt
	Model  string   // harness-specific model name; empty means its default
	Env    []string // full environment for the process
	// SessionID continues an earlier session (plan revise, repair), where
	// the harness supports it; empty starts a new one.
	SessionID string
	// ReadOnly asks the harness to deny edits where it can (plan mode). The
	// runner verifies the tree is clean afterwards either way.
	ReadOnly bool
	// Images are pictures the agent is shown with the prompt (the issue's
	// screenshots). A harness whose CLI takes images passes them on;
	// ImageTaker says which do.
	Images []Image
	// BudgetUSD is what is left of the run's budget for this invocation.
	// A harness whose CLI can stop itself at a cost passes it on, so the
	// budget holds even where the CLI reports cost only when it ends; the
	// runner's own guard stays. Zero is none.
	BudgetUSD float64
}

// Image is a picture for the agent: a file the runner wrote (Path, which
// a CLI that reads files opens as the agent) and its bytes (Data, which a
// CLI that takes them on stdin gets).
type Image struct {
	Path      string
	MediaType string
	Data      []byte
}

// ImageTaker is a harness whose CLI shows the agent images.
type ImageTaker interface {
	TakesImages() bool
}

// Harness starts an agent and parses its output.
type Harness interface {
	// Name is "opencode", "claude-code" or "command".
	Name() string
	// Command builds the process for req. The runner owns starting it, its
	// process group, its pipes and killing it.
	Command(req Request) (*exec.Cmd, error)
	// NewParser returns a parser for one process's output.
	NewParser() Parser
}

// Parser turns the agent's output lines into events. A malformed or partial
// line returns an error; the runner counts it and goes on, it is never fatal.
type Parser interface {
	// ParseStdout parses one line of stdout.
	ParseStdout(line []byte) ([]Event, error)
	// ParseStderr parses one line of stderr (stall detection, errors); most
	// lines yield nothing.
	ParseStderr(line []byte) []Event
}
