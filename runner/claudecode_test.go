package runner_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The pipeline with the real Claude Code CLI against the scripted Anthropic
// server: the agent writes a file, the runner commits and pushes it, and
// the receipt's cost is the CLI's own total_cost_usd.
func TestClaudeCodeExecute(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	e := newRunEnv(t, nil)
	notes := filepath.Join(e.opts.WorkDir, "repo", "NOTES.md")
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "Writing the notes.", Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 80}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Write", Input: map[string]any{"file_path": notes, "content": "# Notes\n\nadd.sh adds.\n"}}}},
		{Text: "Added NOTES.md.", Usage: modeltest.AnthropicUsage{InputTokens: 1200, OutputTokens: 20}},
	}})
	e.opts.Environ = append(e.opts.Environ, srv.Env()...)
	e.opts.Bins = harness.Bins{ClaudeCode: bin}
	remote := runtest.NewRemote(t, projectFiles())
	cfg := sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID, Validate: checks("notes", "grep -q adds NOTES.md")}
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if got, ok := remote.File(t, o.TargetBranch, "NOTES.md"); !ok || !strings.Contains(got, "add.sh adds.") {
		t.Fatalf("NOTES.md on the remote = %q, %v", got, ok)
	}
	tu := res.TokenUsage
	// Claude Code prices Sonnet 4.5 at $3/M input and $15/M output.
	want := (2200*3.0 + 100*15.0) / 1e6
	if tu.Input != 2200 || tu.Output != 100 || tu.Steps != 2 || !near(tu.TotalCostUSD, want) {
		t.Fatalf("token_usage = %+v, want 2200 in, 100 out, 2 steps, $%v", tu, want)
	}
	if res.PRSummary != "Added NOTES.md." {
		t.Fatalf("pr_summary = %q", res.PRSummary)
	}
	if c := checkByName(res, "notes"); c == nil || !c.Passed {
		t.Fatalf("validation = %+v", res.Validation)
	}
	wantFirstTurn(t, progressLines(t, e.progress.String()), res)
}

// Claude Code reports its cost only when it ends, so the runner's guard
// alone could not stop it mid-run: the run's budget is handed to the CLI
// (--max-budget-usd), which stops itself after the turn that passes it.
func TestClaudeCodeStopsAtTheRunsBudget(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	e := newRunEnv(t, nil)
	// Each turn costs $0.0165 (5000 in, 100 out at Sonnet's prices).
	turn := modeltest.AnthropicTurn{Text: "Looking around.", Usage: modeltest.AnthropicUsage{InputTokens: 5000, OutputTokens: 100}, ToolUses: []modeltest.AnthropicToolUse{
		{Name: "Bash", Input: map[string]any{"command": "git status --short", "description": "Show status"}}}}
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{turn, turn, turn, turn,
		{Text: "done", Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 5}}}})
	e.opts.Environ = append(e.opts.Environ, srv.Env()...)
	e.opts.Bins = harness.Bins{ClaudeCode: bin}
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModeExecute, sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID})
	o.BudgetUSD = 0.02
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusBudgetExceeded)
	if served := srv.Served(); served > 2 {
		t.Errorf("the model served %d turns; the CLI should have stopped after the second ($0.033 > $0.02)", served)
	}
	if c := res.TokenUsage.TotalCostUSD; c < 0.02 || c > 0.04 {
		t.Errorf("cost $%v: want the turns up to the one that passed $0.02", c)
	}
}
