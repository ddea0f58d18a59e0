package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// piped is a started agent process and the reading ends of its output.
type piped struct {
	cmd        *exec.Cmd
	pgid       int
	outR, errR *os.File
}

// startPiped starts cmd in its own process group with plain pipes for
// stdout and stderr.
func startPiped(cmd *exec.Cmd) (*piped, error) {
	// Its own process group, so the watchdog kills the agent's children
	// (shells, test runners, dev servers) with it, and a terminal's ^C
	// reaches only the runner, which decides. A credential set by the
	// caller (the agent's uid) is kept.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	// A runner killed outright (the OOM killer, a lost machine on the
	// process backend) takes its agent down instead of leaving it working
	// unsupervised. The runner never locks goroutines to threads, so the
	// signal is not sent early by an ending thread.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	// Plain pipes handed to the child: the reading ends see EOF when every
	// holder exits, and a background grandchild that keeps them open is
	// dealt with by the supervision instead of blocking Wait.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	return &piped{cmd: cmd, pgid: cmd.Process.Pid, outR: outR, errR: errR}, nil
}

// lines parses both streams on their own goroutines into one channel,
// closed when both reach EOF (or are closed).
func (p *piped) lines(parser harness.Parser) <-chan lineEvent {
	var parseMu sync.Mutex // the parser is one object fed from two streams
	ch := make(chan lineEvent, 256)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		readLines(p.outR, func(l []byte) {
			parseMu.Lock()
			evs, perr := parser.ParseStdout(l)
			parseMu.Unlock()
			ch <- lineEvent{events: evs, parseErr: perr}
		})
	}()
	go func() {
		defer readers.Done()
		readLines(p.errR, func(l []byte) {
			parseMu.Lock()
			evs := parser.ParseStderr(l)
			parseMu.Unlock()
			ch <- lineEvent{events: evs, stderr: string(l)}
		})
	}()
	go func() { readers.Wait(); close(ch) }()
	return ch
}

func (p *piped) closeReaders() {
	p.outR.Close()
	p.errR.Close()
}

// supervision is the watchdog loop over one agent process: it feeds the
// tally, stops the agent on a hang, the budget or the run's end, and
// reaps what the agent left in its group.
type supervision struct {
	a   *agentProc
	out *agentOutcome
	p   *piped
	t   *tally

	exitErr   error
	hasExited bool
	stopping  bool
	killTimer <-chan time.Time
}

func (s *supervision) stop(reason StopReason) {
	if s.stopping {
		return
	}
	s.stopping = true
	s.out.Stop = reason
	s.out.Diagnostic = s.t.diagnostic(s.a.costSoFar, time.Now())
	s.a.log.Warn().Str("reason", string(reason)).Str("last_event", s.t.lastType).Int("step", s.t.steps).Float64("cost_usd", s.a.costSoFar+s.t.cost()).Msg("stopping the agent")
	signalGroup(s.p.pgid, syscall.SIGTERM)
	s.killTimer = time.After(s.a.killGrace)
}

func (s *supervision) take(le lineEvent) {
	if le.parseErr != nil {
		s.t.parseError()
		s.a.log.Debug().Err(errors.New(s.a.red.String(le.parseErr.Error()))).Msg("skipped an agent output line")
	}
	if le.stderr != "" {
		s.t.stderrLine(s.a.red.String(le.stderr))
	}
	for _, ev := range le.events {
		s.t.add(ev, time.Now())
		if s.a.onEvent != nil {
			s.a.onEvent(ev, s.t.stats())
		}
		if s.a.costCap > 0 && s.t.cost() > s.a.costCap {
			s.stop(StopBudget)
		}
	}
}

func (s *supervision) loop(ctx context.Context, lines <-chan lineEvent) {
	exited := make(chan error, 1)
	go func() { exited <- s.p.cmd.Wait() }()
	tick := time.NewTicker(watchdogTick(s.a.inactivity))
	defer tick.Stop()
	done := ctx.Done()
	var drainTimer <-chan time.Time
	for !s.hasExited || lines != nil {
		select {
		case le, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			s.take(le)
		case <-tick.C:
			limit := s.a.inactivity
			if !s.t.gotEvent {
				limit = max(s.a.inactivity, s.a.startupGrace)
			}
			if !s.stopping && !s.hasExited && s.t.idle(time.Now()) > limit {
				s.stop(StopHung)
			}
		case <-done:
			done = nil
			if !s.hasExited {
				s.stop(StopInterrupted)
			}
		case err := <-exited:
			s.hasExited, s.exitErr = true, err
			exited = nil
			// Whatever the agent left running in its group goes with it.
			signalGroup(s.p.pgid, syscall.SIGKILL)
			drainTimer = time.After(2 * time.Second)
		case <-s.killTimer:
			signalGroup(s.p.pgid, syscall.SIGKILL)
			s.killTimer = nil
		case <-drainTimer:
			// A process outside the group holds the pipes; stop reading.
			// The readers end, and the channel closes, once what they
			// hold is delivered.
			s.p.closeReaders()
			drainTimer = nil
		}
	}
	s.p.closeReaders()
}

func (s *supervision) outcome() *agentOutcome {
	out, t := s.out, s.t
	out.SessionID = t.sessionID
	out.FinalText = t.finalText()
	out.Usage = t.usage()
	out.Tools = t.tools
	out.ParseErrors = t.parseErrors
	for _, e := range t.errors {
		out.Errors = append(out.Errors, s.a.red.String(e))
	}
	for _, e := range t.stalls {
		out.Stalls = append(out.Stalls, s.a.red.String(e))
	}
	if out.Stop == StopNone && s.exitErr != nil {
		out.ExitErr = s.exitErr
	}
	out.StderrTail = strings.Join(t.stderr, "\n")
	s.a.log.Info().Str("session", out.SessionID).Int("steps", t.completed).Float64("cost_usd", t.cost()).
		Int("parse_errors", out.ParseErrors).Str("stop", string(out.Stop)).AnErr("exit", s.exitErr).
		Dur("took", time.Since(t.start)).Msg("agent ended")
	return out
}
