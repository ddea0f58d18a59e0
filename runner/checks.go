package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// Output tails kept in the receipt and sent to the agent for repair: enough
// for a compiler error or a failing test's assertion, small enough for a PR
// body and a prompt.
const (
	tailBytes = 4000
	tailLines = 60
)

// checkRun is one execution of one validate check.
type checkRun struct {
	Check    sandboxcfg.Check
	Passed   bool
	Duration time.Duration
	Tail     string
	TimedOut bool
}

// shellRun runs command with sh -c in dir, in its own process group that
// is killed when ctx ends or timeout passes. It returns the combined
// output tail (redacted), whether it timed out, and the exit error.
func shellRun(ctx context.Context, dir string, env []string, as *AgentUser, command string, timeout time.Duration, red *Redactor) (string, bool, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	as.apply(cmd)
	var buf tailBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	// Background children (a test runner's workers) must not keep Wait
	// waiting for the output pipe after the group is killed.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return "", false, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	timedOut := false
	select {
	case err = <-exited:
	case <-ctx.Done():
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		signalGroup(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err = <-exited:
		case <-time.After(5 * time.Second):
			signalGroup(cmd.Process.Pid, syscall.SIGKILL)
			err = <-exited
		}
		if err == nil {
			err = ctx.Err()
		}
	}
	signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	out := red.String(lastLines(buf.String(), tailLines, tailBytes))
	if timedOut {
		out = strings.TrimRight(out, "\n") + fmt.Sprintf("\n[sandbox-runner: killed after %s]", timeout)
	}
	return out, timedOut, err
}

// runChecks runs every check in order. A check that fails does not stop the
// others: the agent repairs them all at once.
func runChecks(ctx context.Context, dir string, env []string, as *AgentUser, checks sandboxcfg.Checks, red *Redactor, report func(checkRun)) []checkRun {
	var runs []checkRun
	for _, c := range checks {
		if ctx.Err() != nil {
			break
		}
		timeout := time.Duration(c.TimeoutSeconds) * time.Second
		start := time.Now()
		tail, timedOut, err := shellRun(ctx, dir, env, as, c.Command, timeout, red)
		run := checkRun{Check: c, Passed: err == nil, Duration: time.Since(start), Tail: tail, TimedOut: timedOut}
		if ctx.Err() != nil && !timedOut {
			break // the run is ending; this check says nothing
		}
		runs = append(runs, run)
		if report != nil {
			report(run)
		}
	}
	return runs
}

func failing(runs []checkRun) []checkRun {
	var out []checkRun
	for _, r := range runs {
		if !r.Passed {
			out = append(out, r)
		}
	}
	return out
}

// tailBuffer keeps the last 256 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const tailKeep = 256 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if t.buf.Len() > 2*tailKeep {
		b := append([]byte(nil), t.buf.Bytes()[t.buf.Len()-tailKeep:]...)
		t.buf.Reset()
		t.buf.Write(b)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// lastLines keeps at most n lines and max bytes from the end of s.
func lastLines(s string, n, maxBytes int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	cut := false
	if len(lines) > n {
		lines, cut = lines[len(lines)-n:], true
	}
	out := strings.Join(lines, "\n")
	if len(out) > maxBytes {
		out, cut = out[len(out)-maxBytes:], true
		if i := strings.IndexByte(out, '\n'); i >= 0 {
			out = out[i+1:]
		}
	}
	if cut {
		out = "…\n" + out
	}
	return out
}
