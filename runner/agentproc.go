package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// agentProc runs the harness's process and turns its output into events.
type agentProc struct {
	h          harness.Harness
	req        harness.Request
	inactivity time.Duration
	// startupGrace is how long the agent may take to print its first event
	// (a cold CLI start); at least the inactivity timeout.
	startupGrace time.Duration
	killGrace    time.Duration
	log          zerolog.Logger
	red          *Redactor
	// as is the user the agent runs as (nil: the runner's own).
	as *AgentUser
	// onEvent sees every event, in order, on the caller's goroutine, with
	// the invocation's counters after it.
	onEvent func(harness.Event, agentStats)
	// costSoFar is the run's cost before this invocation (diagnostics).
	costSoFar float64
	costCap   float64
}

type lineEvent struct {
	events   []harness.Event
	parseErr error
	stderr   string
}

// run starts the agent and supervises it until it exits or is stopped.
func (a *agentProc) run(ctx context.Context) *agentOutcome {
	out := &agentOutcome{SessionID: a.req.SessionID}
	cmd, err := a.h.Command(a.req)
	if err != nil {
		out.ExitErr = err
		return out
	}
	a.as.apply(cmd)
	p, err := startPiped(cmd)
	if err != nil {
		out.ExitErr = fmt.Errorf("start %s: %w", a.h.Name(), err)
		return out
	}
	a.log.Info().Str("harness", a.h.Name()).Int("pid", p.pgid).Str("session", a.req.SessionID).Bool("read_only", a.req.ReadOnly).Msg("agent started")
	s := &supervision{a: a, out: out, p: p, t: newTally(a.req.SessionID, time.Now())}
	s.loop(ctx, p.lines(a.h.NewParser()))
	return s.outcome()
}

// watchdogTick checks often enough that a hang is noticed within about a
// tenth of the timeout.
func watchdogTick(inactivity time.Duration) time.Duration {
	t := inactivity / 10
	return min(max(t, 50*time.Millisecond), time.Second)
}

func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

// readLines calls fn for each line of r (without the newline). Lines may be
// long (a tool call carrying a whole file); past 64 MiB a line is cut.
func readLines(r io.Reader, fn func([]byte)) {
	br := bufio.NewReaderSize(r, 256*1024)
	const maxLine = 64 << 20
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) <= maxLine {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 {
			fn(append([]byte(nil), trimNewline(buf)...))
		}
		buf = buf[:0]
		if err != nil {
			return
		}
	}
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
