package runner

import (
	"fmt"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// StageAgentStart is the receipt's stage from the agent's exec to its
// first model turn: the agent CLI's own start in the sandbox.
const StageAgentStart = "agent start"

// firstTurnMessage begins the progress line of the agent's first model
// turn; the bot's tests and the start benchmark look for it.
const firstTurnMessage = "agent's first model turn"

// firstTurn notices the first model turn of one agent invocation. The
// sign is the CLI's first step_start event (OpenCode: its step_start line,
// stamped by OpenCode when the model's stream began; Claude Code: the
// first message_start of its stream): the runner sees no request itself,
// the model gateway runs in the init and serves only gateway providers,
// and a provider the agent reaches directly is seen by nobody else. The
// span is therefore exec → the model's answer began, which is the request
// leaving plus the model's time to its first byte.
type firstTurn struct {
	stage   string
	started time.Time
	seen    bool
}

// see returns the progress line for ev if it is the invocation's first
// step start, and the span it reports.
func (f *firstTurn) see(ev harness.Event) (dispatch.Progress, time.Duration, bool) {
	if f.seen || ev.Type != harness.EventStepStart {
		return dispatch.Progress{}, 0, false
	}
	f.seen = true
	at := ev.Time
	// A CLI's own stamp before the exec (another clock) or in the future
	// is not believed; the runner's clock is.
	if at.Before(f.started) || at.After(time.Now()) {
		at = time.Now()
	}
	d := at.Sub(f.started)
	return dispatch.Progress{Stage: f.stage, Time: at.UTC(),
		Message: fmt.Sprintf("%s %.1fs after the agent started", firstTurnMessage, d.Seconds())}, d, true
}
