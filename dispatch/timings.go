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

// InitStep notes a stage that is one step of the sandbox's start (the
// "sandbox" stage spans them all).
const InitStep = "init step"

// Summary is the stages that lead to the agent's first event, for a
// receipt: "sandbox 1.2 s, clone 0.3 s, setup 0.8 s (cached), agent 2.1 s
// to its first event". The init's single steps are left to the JSON.
func (t *Timings) Summary() string {
	if t == nil {
		return ""
	}
	out := ""
	for _, s := range t.Stages {
		if s.Note == InitStep || (!t.FirstAgentEvent.IsZero() && s.Start.After(t.FirstAgentEvent)) {
			continue
		}
		if out != "" {
			out += ", "
		}
		secs, note := s.Seconds, s.Note
		if s.Stage == "agent" && !t.FirstAgentEvent.IsZero() {
			secs, note = t.FirstAgentEvent.Sub(s.Start).Seconds(), "to its first event"
		}
		out += fmt.Sprintf("%s %.1f s", s.Stage, secs)
		if note != "" {
			out += " (" + note + ")"
		}
	}
	return out
}

// StartTimings is the file the sandbox's init writes for the runner
// (EnvStartTimings): when it started and its steps. The init writes it again
// when it starts the inner daemon on first use, mid-run.
type StartTimings struct {
	Started time.Time     `json:"started"`
	Stages  []StageTiming `json:"stages"`
}
