package dispatch

import (
	"fmt"
	"time"
)

// SetupReport is what became of lifecycle.setup in a run.
type SetupReport struct {
	// Status is SetupRan, SetupCached or SetupFailed.
	Status string `json:"status"`
	// Cache says what the setup cache did, in a sentence: "restored entry
	// …", "saved entry …", "not saved: …", "entry … refused: …".
	Cache string `json:"cache,omitempty"`
	// Key is the setup cache key of the run ("" without the cache).
	Key     string  `json:"key,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Setup statuses.
const (
	SetupRan    = "ran"
	SetupCached = "cached"
	SetupFailed = "failed"
)

// String is the receipt's line: "setup: cached (restored entry …)".
func (s *SetupReport) String() string {
	if s == nil {
		return ""
	}
	line := "setup: " + s.Status
	if s.Cache != "" {
		line += " (" + s.Cache + ")"
	}
	return line
}

// Timings are a run's stages in the order they started. The sandbox's own
// start (its init's steps) comes first; stages may overlap.
type Timings struct {
	// RequestedAt is the work order's: when the run was asked for.
	RequestedAt time.Time `json:"requested_at,omitzero"`
	// SandboxStarted is when the sandbox's init started (zero outside a
	// sandbox).
	SandboxStarted time.Time `json:"sandbox_started,omitzero"`
	// FirstAgentEvent is when the agent CLI printed its first event: its
	// first model request has been answered by then.
	FirstAgentEvent time.Time `json:"first_agent_event,omitzero"`
	// FirstEventSeconds is FirstAgentEvent after RequestedAt (or after the
	// sandbox's start when the order has no request time); 0 when the
	// agent printed nothing.
	FirstEventSeconds float64       `json:"first_event_seconds,omitempty"`
	Stages            []StageTiming `json:"stages"`
}

// StageTiming is one stage: when it started and how long it took.
type StageTiming struct {
	Stage   string    `json:"stage"`
	Start   time.Time `json:"start"`
	Seconds float64   `json:"seconds"`
	// Note qualifies the stage ("on first use", "cached", "failed").
	Note string `json:"note,omitempty"`
}

// Summary is the stages that lead to the agent's first event, for a
// receipt: "sandbox 1.2 s, clone 0.3 s, setup 0.8 s (cached), agent 2.1 s".
func (t *Timings) Summary() string {
	if t == nil {
		return ""
	}
	out := ""
	for _, s := range t.Stages {
		if !t.FirstAgentEvent.IsZero() && s.Start.After(t.FirstAgentEvent) {
			continue
		}
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%s %.1f s", s.Stage, s.Seconds)
		if s.Note != "" {
			out += " (" + s.Note + ")"
		}
	}
	return out
}
