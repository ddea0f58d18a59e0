package runner_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The same through Claude Code's --mcp-config, where the browser's tools
// are mcp__browser__<tool> and allowed without a prompt: the snapshot's
// tool_result holds the page's text, the screenshot's an image block of
// the page.
func TestBrowserToolsClaudeCode(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	e := newRunEnv(t, nil)
	files, dev := browserProject(t, e)
	url := "http://127.0.0.1:" + strconv.Itoa(dev.Port) + "/"
	call := func(tool string, in map[string]any) modeltest.AnthropicTurn {
		return modeltest.AnthropicTurn{Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 20},
			ToolUses: []modeltest.AnthropicToolUse{{Name: "mcp__browser__" + tool, Input: in}}}
	}
	notes := e.opts.WorkDir + "/repo/NOTES.md"
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		call("navigate_page", map[string]any{"type": "url", "url": url}),
		call("take_snapshot", map[string]any{}),
		call("take_screenshot", map[string]any{}),
		{Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 20}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Write", Input: map[string]any{"file_path": notes, "content": "# Notes\n\nThe page shows the canary.\n"}}}},
		{Text: "Checked the page and wrote NOTES.md.", Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 20}},
	}})
	// Claude Code defers MCP tools behind its ToolSearch tool by default,
	// which a real model calls first; the script calls the tools straight
	// away, so they are loaded up front here.
	e.opts.Environ = append(e.opts.Environ, append(srv.Env(), "ENABLE_TOOL_SEARCH=false")...)
	e.opts.Bins = harness.Bins{ClaudeCode: bin}
	remote := runtest.NewRemote(t, files)
	cfg := sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID, Dev: dev}
	res := run(t, e, order(t, remote.URL, dispatch.ModeExecute, cfg))
	wantStatus(t, res, dispatch.StatusCompleted)

	reqs := srv.ScriptedRequests()
	if len(reqs) < 5 {
		t.Fatalf("the model served %d scripted turns, want 5", len(reqs))
	}
	if !strings.Contains(reqs[0].UserText(), url[:len(url)-1]) {
		t.Errorf("the prompt does not give the dev URL %s", url)
	}
	if !containsAll(strings.Join(reqs[0].Tools, " "), "mcp__browser__take_snapshot", "mcp__browser__take_screenshot") {
		t.Fatalf("Claude Code did not offer the browser's tools: %v", reqs[0].Tools)
	}
	snap := reqs[2].ToolResults()
	if len(snap) != 1 || snap[0].IsError || !strings.Contains(snap[0].Text, browserText) {
		t.Fatalf("the snapshot's tool_result lacks the page text %q: %+v", browserText, snap)
	}
	shot := reqs[3].ToolResults()
	if len(shot) != 1 || shot[0].IsError || len(shot[0].Images) == 0 {
		t.Fatalf("the screenshot's tool_result carries no image: %+v", shot)
	}
	if g := greenShare(t, shot[0].Images[0]); g < 0.5 {
		t.Fatalf("only %.0f%% of the screenshot is the page's green", g*100)
	}
	wantBrowserUsed(t, res, "mcp__browser__take_snapshot", "mcp__browser__take_screenshot")
}
