package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/gateway"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// StageAgentStart is the receipt's stage from the agent's exec to its
// first model request: the agent CLI's own start in the sandbox.
const StageAgentStart = "agent start"

// firstRequestMessage begins the progress line of the agent's first model
// request; the bot's tests and the start benchmark look for it.
const firstRequestMessage = "agent's first model request"

// The signs of the first model request. The model gateway (in the init)
// sees every request of a provider it serves, as it leaves the sandbox:
// the runner waits there (gateway.WaitNextRequest). A provider the agent
// reaches directly is seen by nobody else; the nearest sign is then the
// CLI's first step_start event, which comes no earlier than the model's
// answer began (OpenCode prints it late, Claude Code at message_start).
const (
	signGateway   = "seen by the model gateway"
	signStepStart = "its first step began; no gateway serves this provider"
)

// firstTurn reports the agent's first model request of one invocation,
// once, from whichever sign comes first: a progress line (time since the
// agent started) and the receipt's "agent start" stage, so a slow CLI
// start shows on the run page and in the receipt.
type firstTurn struct {
	stage   string
	started time.Time
	report  func(dispatch.Progress, time.Duration, string)

	mu   sync.Mutex
	seen bool
}

// see takes an agent event: the first step start is a sign.
func (f *firstTurn) see(ev harness.Event) {
	if ev.Type == harness.EventStepStart {
		f.at(ev.Time, signStepStart)
	}
}

// at reports the first model request at t (by sign), unless one was
// reported already.
func (f *firstTurn) at(t time.Time, sign string) {
	f.mu.Lock()
	if f.seen {
		f.mu.Unlock()
		return
	}
	f.seen = true
	f.mu.Unlock()
	// A stamp before the exec or in the future is another clock's; the
	// runner's is believed instead.
	if t.Before(f.started) || t.After(time.Now()) {
		t = time.Now()
	}
	d := t.Sub(f.started)
	f.report(dispatch.Progress{Stage: f.stage, Time: t.UTC(),
		Message: fmt.Sprintf("%s %.1fs after the agent started (%s)", firstRequestMessage, d.Seconds(), sign)}, d, sign)
}

// watchGateway waits at the model gateway (when the sandbox runs one) for
// the first model request since the agent started, until ctx ends; the
// returned function waits for the watch to end.
func (f *firstTurn) watchGateway(ctx context.Context, env []string) func() {
	url := os.Getenv(dispatch.EnvModelGateway)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, dispatch.EnvModelGateway+"="); ok {
			url = v
		}
	}
	if url == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if nr, err := gateway.WaitNextRequest(ctx, url, f.started); err == nil {
			f.at(nr.Time, signGateway)
		}
	}()
	return func() { <-done }
}
