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

const reviewText = "**Risks**\n- none\n\n**Missing tests**\n- NOTES.md has no check\n\n**Deviations**\n- none"

func reviewCfg(c sandboxcfg.Config) sandboxcfg.Config {
	on := true
	c.Review = sandboxcfg.Review{Enabled: &on, BudgetShare: 0.2}
	return c
}

// The reviewer's pass through OpenCode: after validation, a fresh
// read-only session gets the issue, the plan and the diff, and its review
// and its cost are in the receipt; what it was offered cannot write.
func TestOpenCodeReviewerPass(t *testing.T) {
	t.Parallel()
	e, srv := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("NOTES.md", "# Notes\n\nadd.sh adds.\n")}, Usage: usage(1000, 50)},
		{Text: "Added NOTES.md.", Usage: usage(1100, 10)},
		// the reviewer
		{Text: reviewText, Usage: usage(2000, 60)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModeExecute, reviewCfg(sandboxcfg.Config{Validate: checks("notes", "test -s NOTES.md")}))
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	rv := res.Review
	if rv == nil || rv.Text != reviewText || !near(rv.CostUSD, cost(2000, 60)) || rv.Error != "" || rv.Harness != "opencode" {
		t.Fatalf("review = %+v", rv)
	}
	if !near(res.TokenUsage.TotalCostUSD, cost(2100, 60)+cost(2000, 60)) {
		t.Fatalf("the total cost %v does not count the reviewer's", res.TokenUsage.TotalCostUSD)
	}
	reqs := srv.ScriptedRequests()
	rq := reqs[len(reqs)-1]
	prompt := rq.LastUser()
	for _, want := range []string{"You are reviewing a change", "# The approved plan\n\n1. Write NOTES.md.", "+add.sh adds.", "Write NOTES.md describing add.sh."} {
		if !strings.Contains(prompt, want) {
			t.Fatalf("the review prompt lacks %q:\n%s", want, prompt)
		}
	}
	if len(rq.Messages) > 3 {
		t.Fatalf("the reviewer's session is not fresh: %d messages", len(rq.Messages))
	}
	for _, tool := range rq.Tools {
		if tool == "write" || tool == "edit" {
			t.Fatalf("the reviewer was offered the %s tool", tool)
		}
	}
	if len(res.Commits) != 1 {
		t.Fatalf("commits %+v", res.Commits)
	}
}

// The reviewer's pass through Claude Code, on a model of its own: the
// review and the CLI's own cost are in the receipt, and it is offered no
// tool that writes.
func TestClaudeCodeReviewerPass(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	e := newRunEnv(t, nil)
	repo := filepath.Join(e.opts.WorkDir, "repo")
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "Writing the notes.", Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 80}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Write", Input: map[string]any{"file_path": filepath.Join(repo, "NOTES.md"), "content": "# Notes\n\nadd.sh adds.\n"}}}},
		{Text: "Added NOTES.md.", Usage: modeltest.AnthropicUsage{InputTokens: 1200, OutputTokens: 20}},
		// the reviewer
		{Text: reviewText, Usage: modeltest.AnthropicUsage{InputTokens: 3000, OutputTokens: 100}},
	}})
	e.opts.Environ = append(e.opts.Environ, srv.Env()...)
	e.opts.Bins = harness.Bins{ClaudeCode: bin}
	remote := runtest.NewRemote(t, projectFiles())
	cfg := reviewCfg(sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID})
	cfg.Review.Model = "claude-haiku-4-5"
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	rv := res.Review
	// Claude Code prices Haiku 4.5 at $1/M input and $5/M output.
	if rv == nil || rv.Text != reviewText || !near(rv.CostUSD, (3000*1.0+100*5.0)/1e6) || rv.Model != "claude-haiku-4-5" {
		t.Fatalf("review = %+v", rv)
	}
	if !near(res.TokenUsage.TotalCostUSD, (2200*3.0+100*15.0)/1e6+rv.CostUSD) {
		t.Fatalf("the total cost %v does not count the reviewer's %v", res.TokenUsage.TotalCostUSD, rv.CostUSD)
	}
	reqs := srv.ScriptedRequests()
	last := reqs[len(reqs)-1]
	if last.Model != "claude-haiku-4-5" || !strings.Contains(last.UserText(), "You are reviewing a change") {
		t.Fatalf("the reviewer's request: model %q, prompt %.300q", last.Model, last.UserText())
	}
	for _, tool := range last.Tools {
		if tool == "Write" || tool == "Edit" {
			t.Fatalf("the reviewer was offered the %s tool", tool)
		}
	}
}

// A reviewer that changes the checkout anyway (a command agent has no
// read-only mode) has its change discarded: nothing of it is pushed.
func TestReviewerChangesAreDiscarded(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	e := newRunEnv(t, nil)
	cfg, _ := countingAgent(t, e, `echo notes > NOTES.md`, `echo evil > evil.txt; echo changed > NOTES.md; git add -A; git commit -qm sneaky; echo "Looks fine."`)
	o := order(t, remote.URL, dispatch.ModeExecute, reviewCfg(cfg))
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if _, ok := remote.File(t, o.TargetBranch, "evil.txt"); ok {
		t.Fatal("the reviewer's file was pushed")
	}
	if got, _ := remote.File(t, o.TargetBranch, "NOTES.md"); got != "notes" {
		t.Fatalf("NOTES.md on the branch = %q", got)
	}
	if rv := res.Review; rv == nil || !strings.Contains(rv.Text, "Looks fine.") || !strings.Contains(rv.Error, "its changes were discarded") {
		t.Fatalf("review = %+v", rv)
	}
}

// plan.strict through OpenCode: a file outside the approved plan's files
// fails validation, the repair prompt names it, and the agent's repair
// removes it before anything outside the plan is pushed for good.
func TestOpenCodeStrictPlanRepairsAnOutsideFile(t *testing.T) {
	t.Parallel()
	e, srv := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("NOTES.md", "# Notes\n"), write("extra.txt", "not planned\n")}, Usage: usage(1000, 50)},
		{Text: "Added NOTES.md.", Usage: usage(1100, 10)},
		// repair
		{ToolCalls: []modeltest.ToolCall{bash("rm extra.txt")}, Usage: usage(1200, 20)},
		{Text: "Removed extra.txt.", Usage: usage(1300, 10)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	strict := true
	o := order(t, remote.URL, dispatch.ModeExecute, sandboxcfg.Config{Plan: sandboxcfg.Plan{Strict: &strict}})
	o.PlanFiles = []dispatch.PlanFile{{Path: "NOTES.md", Note: "the notes"}}
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	reqs := srv.ScriptedRequests()
	if !strings.Contains(reqs[0].LastUser(), "- `NOTES.md` — the notes") || !strings.Contains(reqs[0].LastUser(), "plan.strict") {
		t.Fatalf("the execute prompt does not name the plan's files:\n%s", reqs[0].LastUser())
	}
	if p := reqs[2].LastUser(); !strings.Contains(p, "## sandbox/plan-scope") || !strings.Contains(p, "- extra.txt") {
		t.Fatalf("the repair prompt:\n%s", p)
	}
	if _, ok := remote.File(t, o.TargetBranch, "extra.txt"); ok {
		t.Fatal("extra.txt is on the branch")
	}
	if ps := res.PlanScope; ps == nil || len(ps.Outside) != 0 || !ps.Strict || len(res.Repairs) != 1 {
		t.Fatalf("plan_scope %+v, repairs %+v", ps, res.Repairs)
	}
}
