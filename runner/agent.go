package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

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
	// CostCap stops the agent when this invocation's cost passes it; 0 is
	// no cap.
	CostCap float64
}

// agentOutcome is what one invocation did.
type agentOutcome struct {
	SessionID   string
	FinalText   string
	Usage       dispatch.TokenUsage
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
	// onEvent sees every event, in order, on the caller's goroutine, with
	// the invocation's counters after it.
	onEvent func(harness.Event, agentStats)
	// costSoFar is the run's cost before this invocation (diagnostics).
	costSoFar float64
	costCap   float64
}

// agentStats are an invocation's counters, for progress lines.
type agentStats struct {
	Steps     int     // steps started
	Completed int     // steps finished
	ToolCalls int     // tool calls so far
	CostUSD   float64 // this invocation's cost so far
	Tokens    int64   // input + output tokens so far
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
	// Its own process group, so the watchdog kills the agent's children
	// (shells, test runners, dev servers) with it, and a terminal's ^C
	// reaches only the runner, which decides.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Plain pipes handed to the child: the reading ends see EOF when every
	// holder exits, and a background grandchild that keeps them open is
	// dealt with below instead of blocking Wait.
	outR, outW, err := os.Pipe()
	if err != nil {
		out.ExitErr = err
		return out
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		out.ExitErr = err
		return out
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		out.ExitErr = fmt.Errorf("start %s: %w", a.h.Name(), err)
		return out
	}
	outW.Close()
	errW.Close()
	pgid := cmd.Process.Pid
	a.log.Info().Str("harness", a.h.Name()).Int("pid", pgid).Str("session", a.req.SessionID).Bool("read_only", a.req.ReadOnly).Msg("agent started")

	parser := a.h.NewParser()
	var parseMu sync.Mutex // the parser is one object fed from two streams
	lines := make(chan lineEvent, 256)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		readLines(outR, func(l []byte) {
			parseMu.Lock()
			evs, perr := parser.ParseStdout(l)
			parseMu.Unlock()
			lines <- lineEvent{events: evs, parseErr: perr}
		})
	}()
	go func() {
		defer readers.Done()
		readLines(errR, func(l []byte) {
			parseMu.Lock()
			evs := parser.ParseStderr(l)
			parseMu.Unlock()
			lines <- lineEvent{events: evs, stderr: string(l)}
		})
	}()
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		start       = time.Now()
		lastAt      = start
		lastType    = "none"
		gotEvent    bool
		steps       int
		completed   int
		toolCalls   int
		stepText    strings.Builder
		lastText    string
		lastLine    bool // the text so far ends with a plain-text line
		deltaCost   float64
		totalCost   float64
		resultTok   harness.Tokens
		stepTok     harness.Tokens
		stderrLines []string
		exitErr     error
		hasExited   bool
		stopping    bool
		killTimer   <-chan time.Time
		drainTimer  <-chan time.Time
	)
	cost := func() float64 { return max(deltaCost, totalCost) }
	diag := func() *dispatch.Diagnostic {
		return &dispatch.Diagnostic{
			LastEventType:  lastType,
			LastEventAt:    lastAt.UTC(),
			CurrentStep:    steps,
			CompletedSteps: completed,
			CostSoFarUSD:   a.costSoFar + cost(),
			IdleSeconds:    time.Since(lastAt).Seconds(),
		}
	}
	stop := func(reason StopReason) {
		if stopping {
			return
		}
		stopping = true
		out.Stop = reason
		out.Diagnostic = diag()
		a.log.Warn().Str("reason", string(reason)).Str("last_event", lastType).Int("step", steps).Float64("cost_usd", a.costSoFar+cost()).Msg("stopping the agent")
		signalGroup(pgid, syscall.SIGTERM)
		killTimer = time.After(a.killGrace)
	}
	handle := func(ev harness.Event) {
		gotEvent = true
		lastAt = time.Now()
		lastType = string(ev.Type)
		if ev.SessionID != "" && ev.Type == harness.EventSession {
			out.SessionID = ev.SessionID
		} else if ev.SessionID != "" && out.SessionID == "" {
			out.SessionID = ev.SessionID
		}
		switch ev.Type {
		case harness.EventStepStart:
			steps++
			stepText.Reset()
		case harness.EventText:
			// Lines of a plain-text agent join with one newline (blank
			// lines kept), parts of a structured one with a blank line.
			if ev.Line && stepText.Len() > 0 {
				sep := "\n\n"
				if lastLine {
					sep = "\n"
				}
				stepText.WriteString(sep + ev.Text)
				lastText, lastLine = stepText.String(), true
			} else if strings.TrimSpace(ev.Text) != "" {
				if stepText.Len() > 0 {
					stepText.WriteString("\n\n")
				}
				stepText.WriteString(ev.Text)
				lastText, lastLine = stepText.String(), ev.Line
			}
		case harness.EventStepFinish:
			completed++
			stepTok = addTokens(stepTok, ev.Tokens)
			if ev.CostIsTotal {
				totalCost = ev.CostUSD
			} else {
				deltaCost += ev.CostUSD
			}
		case harness.EventResult:
			resultTok = maxTokens(resultTok, ev.Tokens)
			if ev.CostIsTotal {
				totalCost = ev.CostUSD
			} else {
				deltaCost += ev.CostUSD
			}
			if strings.TrimSpace(ev.Text) != "" {
				lastText = ev.Text
			}
		case harness.EventToolUse:
			toolCalls++
		case harness.EventError:
			out.Errors = append(out.Errors, a.red.String(ev.Text))
		case harness.EventStall:
			out.Stalls = append(out.Stalls, a.red.String(ev.Text))
		}
		if a.onEvent != nil {
			tok := maxTokens(stepTok, resultTok)
			a.onEvent(ev, agentStats{Steps: steps, Completed: completed, ToolCalls: toolCalls, CostUSD: cost(), Tokens: tok.Input + tok.Output})
		}
		if a.costCap > 0 && cost() > a.costCap {
			stop(StopBudget)
		}
	}

	tick := time.NewTicker(watchdogTick(a.inactivity))
	defer tick.Stop()
	done := ctx.Done()
	for {
		select {
		case le := <-lines:
			if le.parseErr != nil {
				out.ParseErrors++
				a.log.Debug().Err(errors.New(a.red.String(le.parseErr.Error()))).Msg("skipped an agent output line")
			}
			if le.stderr != "" {
				stderrLines = appendTail(stderrLines, a.red.String(le.stderr), 20)
			}
			for _, ev := range le.events {
				handle(ev)
			}
		case <-tick.C:
			limit := a.inactivity
			if !gotEvent {
				limit = max(a.inactivity, a.startupGrace)
			}
			if !stopping && !hasExited && time.Since(lastAt) > limit {
				stop(StopHung)
			}
		case <-done:
			done = nil
			if !hasExited {
				stop(StopInterrupted)
			}
		case err := <-exited:
			hasExited, exitErr = true, err
			exited = nil
			// Whatever the agent left running in its group goes with it.
			signalGroup(pgid, syscall.SIGKILL)
			drainTimer = time.After(2 * time.Second)
		case <-readersDone:
			readersDone = nil
			if !hasExited {
				continue
			}
		case <-killTimer:
			signalGroup(pgid, syscall.SIGKILL)
			killTimer = nil
		case <-drainTimer:
			// A process outside the group holds the pipes; stop reading.
			outR.Close()
			errR.Close()
			drainTimer = nil
		}
		if hasExited && readersDone == nil {
			break
		}
	}
	// Lines read before the pipes closed may still be queued.
	for {
		select {
		case le := <-lines:
			if le.parseErr != nil {
				out.ParseErrors++
			}
			for _, ev := range le.events {
				handle(ev)
			}
			continue
		default:
		}
		break
	}
	outR.Close()
	errR.Close()

	out.FinalText = strings.TrimSpace(lastText)
	tok := maxTokens(stepTok, resultTok)
	out.Usage = dispatch.TokenUsage{
		Input: tok.Input, Output: tok.Output, Reasoning: tok.Reasoning,
		CacheRead: tok.CacheRead, CacheWrite: tok.CacheWrite,
		TotalCostUSD: cost(), Steps: completed,
	}
	if out.Stop == StopNone && exitErr != nil {
		out.ExitErr = exitErr
	}
	out.StderrTail = strings.Join(stderrLines, "\n")
	a.log.Info().Str("session", out.SessionID).Int("steps", completed).Float64("cost_usd", cost()).
		Int("parse_errors", out.ParseErrors).Str("stop", string(out.Stop)).AnErr("exit", exitErr).
		Dur("took", time.Since(start)).Msg("agent ended")
	return out
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
