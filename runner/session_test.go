package runner_test

import (
	"os"
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

const planTaskID = "T-9A8B7C6D"

// planArchive checks that the plan run saved its session and returns the
// archive, the way the bot hands it to the execute run.
func planArchive(t *testing.T, res *dispatch.Result, o dispatch.WorkOrder) []byte {
	t.Helper()
	s := res.Session
	if s == nil || s.Archive != dispatch.SessionArchiveFile || s.ArchiveBytes == 0 || s.Note != "saved for the execute run" {
		t.Fatalf("plan receipt's session = %+v, want the archive saved", s)
	}
	b, err := os.ReadFile(filepath.Join(o.OutputDir, s.Archive))
	if err != nil || int64(len(b)) != s.ArchiveBytes {
		t.Fatalf("archive: %d bytes, %v; receipt says %d", len(b), err, s.ArchiveBytes)
	}
	return b
}

// planThenExecute plans with pe, then executes with ee, handing over the
// plan's session archive the way the bot does, and checks the execute run
// resumed it and pushed the agent's NOTES.md. It returns the plan's order.
func planThenExecute(t *testing.T, pe, ee *runEnv, cfg sandboxcfg.Config) dispatch.WorkOrder {
	t.Helper()
	starts := countStarts(t, pe, ee)
	remote := runtest.NewRemote(t, projectFiles())
	po := order(t, remote.URL, dispatch.ModePlan, cfg)
	po.TaskID = planTaskID
	pres := run(t, pe, po)
	wantStatus(t, pres, dispatch.StatusCompleted)
	archive := planArchive(t, pres, po)
	t.Logf("the plan's session archive: %d bytes", len(archive))
	if n := starts(); n != 1 {
		t.Fatalf("the plan run started the agent's CLI %d times, want once: carrying the session must not start it", n)
	}

	eo := order(t, remote.URL, dispatch.ModeExecute, cfg)
	eo.Plan = pres.Plan
	eo.Session = &dispatch.SessionHandoff{FromTask: planTaskID, Harness: pres.Session.Harness, ID: pres.Session.ID, Archive: archive}
	res := run(t, ee, eo)
	wantStatus(t, res, dispatch.StatusCompleted)
	if s := res.Session; s == nil || !s.Resumed || s.From != planTaskID || s.Note != "resumed from plan "+planTaskID {
		t.Fatalf("execute receipt's session = %+v, want resumed from %s", s, planTaskID)
	}
	if got, _ := remote.File(t, eo.TargetBranch, "NOTES.md"); !strings.Contains(got, "prints A+B") {
		t.Fatalf("NOTES.md = %q", got)
	}
	if n := starts(); n != 2 {
		t.Fatalf("the execute run started the agent's CLI %d times, want once: restoring the session must not start it", n-1)
	}
	return po
}

// countStarts puts a shim before the agent CLIs of both runs that counts
// their starts, and returns the count so far.
func countStarts(t *testing.T, envs ...*runEnv) func() int {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "starts")
	shim := func(name, real string) string {
		if real == "" {
			return ""
		}
		p := filepath.Join(dir, name)
		script := "#!/bin/sh\necho \"$*\" >>'" + log + "'\nexec '" + real + "' \"$@\"\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, e := range envs {
		e.opts.Bins.OpenCode = shim("opencode", e.opts.Bins.OpenCode)
		e.opts.Bins.ClaudeCode = shim("claude", e.opts.Bins.ClaudeCode)
	}
	return func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
}

// wantPlanHistory checks the first execute request's conversation: the
// plan prompt, the file the agent read while planning, its plan, then the
// short execute prompt.
func wantPlanHistory(t *testing.T, history string) {
	t.Helper()
	for _, want := range []string{"Do not implement anything yet", "add A B prints A+B", "PLAN-MARKER", "Your plan was approved"} {
		if !strings.Contains(history, want) {
			t.Fatalf("the first execute request lacks %q: the plan conversation was not resumed:\n%s", want, history)
		}
	}
}

// The real OpenCode plans in one sandbox-like place (its own HOME and
// checkout path) and executes in another: the execute run imports the
// plan's session and resumes it, so the model's first execute request
// carries the plan conversation (the plan prompt, the file the agent read,
// its plan) and the execute prompt is the short one.
func TestOpenCodeExecuteResumesThePlanSession(t *testing.T) {
	t.Parallel()
	pe, srv := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{bash("cat add.sh")}, Usage: usage(500, 20)},
		{Text: "PLAN-MARKER: write NOTES.md describing add.sh.", Usage: usage(600, 30)},
		// execute
		{ToolCalls: []modeltest.ToolCall{write("NOTES.md", "# Notes\n\nadd.sh prints A+B.\n")}, Usage: usage(900, 40)},
		{Text: "Wrote NOTES.md.", Usage: usage(1000, 10)},
	})
	// Another HOME and another checkout path, as in a new sandbox.
	ee := newRunEnv(t, runtest.OpenCodeEnv(t, srv))
	ee.opts.Bins = pe.opts.Bins
	po := planThenExecute(t, pe, ee, sandboxcfg.Config{Model: srv.OpenCodeModel()})
	if hits := grepTree(t, po.OutputDir, "modeltest-key"); len(hits) > 0 {
		t.Fatalf("the provider key is in the saved session: %v", hits)
	}
	reqs := srv.ScriptedRequests()
	if len(reqs) != 4 {
		t.Fatalf("scripted requests = %d, want 4", len(reqs))
	}
	first := reqs[2]
	var history strings.Builder
	for _, m := range first.Messages {
		history.WriteString(m.Role + ": " + m.Content + "\n")
	}
	wantPlanHistory(t, history.String())
	if strings.Contains(first.LastUser(), "Implement the following task") {
		t.Fatalf("a resumed session got the whole task again:\n%s", first.LastUser())
	}
}

// The same with the real Claude Code against the scripted Anthropic
// server: the transcript moves to the new HOME's project directory of the
// new checkout, and --resume continues it offline.
func TestClaudeCodeExecuteResumesThePlanSession(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	pe := newRunEnv(t, nil)
	ee := newRunEnv(t, nil)
	notes := filepath.Join(ee.opts.WorkDir, "repo", "NOTES.md")
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "Reading.", Usage: modeltest.AnthropicUsage{InputTokens: 500, OutputTokens: 20}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": "cat add.sh", "description": "Show add.sh"}}}},
		{Text: "PLAN-MARKER: write NOTES.md.", Usage: modeltest.AnthropicUsage{InputTokens: 600, OutputTokens: 30}},
		// execute
		{Text: "Writing.", Usage: modeltest.AnthropicUsage{InputTokens: 900, OutputTokens: 40}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Write", Input: map[string]any{"file_path": notes, "content": "# Notes\n\nadd.sh prints A+B.\n"}}}},
		{Text: "Wrote NOTES.md.", Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 10}},
	}})
	for _, e := range []*runEnv{pe, ee} {
		e.opts.Environ = append(e.opts.Environ, srv.Env()...)
		e.opts.Bins = harness.Bins{ClaudeCode: bin}
	}
	planThenExecute(t, pe, ee, sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID})
	reqs := srv.ScriptedRequests()
	if len(reqs) != 4 {
		t.Fatalf("scripted requests = %d, want 4", len(reqs))
	}
	var history strings.Builder
	for _, m := range reqs[2].Messages {
		for _, b := range m.Blocks {
			history.WriteString(m.Role + " " + b.Type + ": " + b.Text + "\n")
		}
	}
	wantPlanHistory(t, history.String())
}
