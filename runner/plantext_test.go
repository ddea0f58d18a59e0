package runner_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// writtenPlan has what a line-based joiner gets wrong: single newlines,
// an indented line and a blank line inside a fenced block.
const writtenPlan = "## Plan\n\n1. Add `greet.sh`:\n\n```sh\nif [ -n \"$1\" ]; then\n    echo \"hello $1\"\n\nfi\n```\n2. Test it.\n3. Done."

// The plan in the receipt is the agent's text as it wrote it, through
// every harness: the command harness joins a plain-text agent's lines with
// single newlines; OpenCode and Claude Code give their text parts whole.
func TestPlanTextAsWritten(t *testing.T) {
	t.Parallel()
	t.Run("command", func(t *testing.T) {
		t.Parallel()
		e := newRunEnv(t, nil)
		remote := runtest.NewRemote(t, projectFiles())
		o := order(t, remote.URL, dispatch.ModePlan, commandCfg("cat > /dev/null\ncat <<'PLAN'\n"+writtenPlan+"\nPLAN\n"))
		res := run(t, e, o)
		wantStatus(t, res, dispatch.StatusCompleted)
		if res.Plan != writtenPlan {
			t.Fatalf("plan:\n%q\nwant\n%q", res.Plan, writtenPlan)
		}
	})
	t.Run("opencode", func(t *testing.T) {
		t.Parallel()
		testenv.Long(t, "runs the OpenCode CLI")
		e, _ := openCodeRunEnv(t, []modeltest.Turn{{Text: writtenPlan, Usage: usage(1000, 80)}})
		remote := runtest.NewRemote(t, projectFiles())
		res := run(t, e, order(t, remote.URL, dispatch.ModePlan, sandboxcfg.Config{}))
		wantStatus(t, res, dispatch.StatusCompleted)
		if res.Plan != writtenPlan {
			t.Fatalf("plan:\n%q\nwant\n%q", res.Plan, writtenPlan)
		}
	})
	t.Run("claude-code", func(t *testing.T) {
		t.Parallel()
		testenv.Long(t, "runs the Claude Code CLI")
		bin := testenv.NPMBin(t, "claude")
		e := newRunEnv(t, nil)
		srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
			{Text: writtenPlan, Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 80}},
		}})
		e.opts.Environ = append(e.opts.Environ, srv.Env()...)
		e.opts.Bins = harness.Bins{ClaudeCode: bin}
		remote := runtest.NewRemote(t, projectFiles())
		cfg := sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID}
		res := run(t, e, order(t, remote.URL, dispatch.ModePlan, cfg))
		wantStatus(t, res, dispatch.StatusCompleted)
		if res.Plan != writtenPlan {
			t.Fatalf("plan:\n%q\nwant\n%q", res.Plan, writtenPlan)
		}
	})
}
