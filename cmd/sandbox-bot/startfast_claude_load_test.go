package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// secondRunClaudeCode is second-run-bare with Claude Code (issue 46): a
// repository without setup, Claude Code through the bot on the scripted
// Anthropic model (reached through the sandbox's model gateway), label →
// the model's first request on the later runs; floor: the same Claude Code
// on the host in a checkout of the repository with a warm HOME, exec → its
// first request to the same server, plus a bare `docker run --rm IMAGE
// true`, alternated with the runs, means.
func secondRunClaudeCode(t *testing.T) {
	img := testenv.SandboxImage(t)
	l := startLoop(t, loopOptions{anthropic: &modeltest.AnthropicScript{}, harness: "claude-code", model: modeltest.AnthropicModelID,
		files: map[string]string{"README.md": "# demo\n"}})
	claude := testenv.NPMBin(t, "claude")
	home := t.TempDir()
	turn := modeltest.AnthropicTurn{Text: planText, Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 20}}
	host := func() time.Duration {
		dir := filepath.Join(t.TempDir(), "repo")
		runtest.Git(t, "", "clone", "--quiet", l.gh.Repo(e2eRepo).GitDir, dir)
		l.anthropic.Append(turn)
		cmd, err := harness.NewClaudeCode(claude).Command(harness.Request{Dir: dir, Prompt: "Write a plan for: pad the output.",
			Model: modeltest.AnthropicModelID, Env: append(runtest.HermeticEnv(home), l.anthropic.Env()...), ReadOnly: true, BudgetUSD: 1})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("claude on the host: %v\n%s", err, out)
		}
		return firstAnthropicRequestAfter(l.anthropic, start).Sub(start)
	}
	var f floor
	f.measureWith(t, img, host) // warms the host's Claude Code HOME
	f.cli, f.bare = nil, nil
	f.measureWith(t, img, host)

	planRun := func(title string) (time.Duration, string) {
		n := l.gh.AddIssue(e2eRepo, e2eWriter, title, "Use left-pad.")
		l.anthropic.Append(turn)
		t0 := time.Now()
		l.label(n)
		c := l.waitComment(n, "## 📋 Plan", 15*time.Minute)
		return firstAnthropicRequestAfter(l.anthropic, t0).Sub(t0), startLine(c)
	}
	got, line := planRun("Pad the output")
	t.Logf("first run: label → first model request %s\n%s", got.Round(time.Millisecond), line)
	f.measureWith(t, img, host)
	rounds := envInt("SANDBOX_STARTLOAD_ROUNDS", 3)
	var runs []time.Duration
	for i := 0; i < rounds; i++ {
		logLoad(t)
		got, line := planRun(fmt.Sprintf("Pad input %d", i+1))
		runs = append(runs, got)
		logLoad(t)
		f.measureWith(t, img, host)
		t.Logf("run %d: label → first model request %s\n%s", i+2, got.Round(time.Millisecond), line)
	}
	fl, later := f.total(), mean(runs)
	t.Logf("Claude Code, later runs: label → first model request %s (mean of %v); floor %s (Claude Code's own start on the host %s + bare docker run %s, means of %d): x%.2f (goal ≤ 1.2)",
		later.Round(time.Millisecond), roundAll(runs), fl.Round(time.Millisecond), mean(f.cli).Round(time.Millisecond), mean(f.bare).Round(time.Millisecond),
		len(f.cli), float64(later)/float64(fl))
	logLoad(t)
}

// firstAnthropicRequestAfter is the scripted Anthropic server's first
// request (of any kind) at or after t0.
func firstAnthropicRequestAfter(s *modeltest.AnthropicServer, t0 time.Time) time.Time {
	for _, r := range s.Requests() {
		if !r.Time.Before(t0) {
			return r.Time
		}
	}
	return time.Time{}
}
