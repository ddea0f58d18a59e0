package handlers

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// The PR body and the plan comment show how the run started: the agent's
// first step after the request with the stages before it, and what the
// setup cache did; the sandbox's words are cleaned first.
func TestStartAndSetupReachTheReceipt(t *testing.T) {
	res := sampleResult("T-0000000A", dispatch.StatusCompleted)
	res.Setup.Cache = "restored `entry` | <b>x</b>\nnext"
	res.Timings.Stages[2].Stage = "clone|`"
	vetSetupAndTimings(res, func(s string) string { return s })
	for _, bad := range []string{"`", "<b>", "\n", "|"} {
		if strings.Contains(res.Setup.Cache, bad) || strings.Contains(res.Timings.Stages[2].Stage, bad) {
			t.Errorf("vetted text still holds %q: %q, %q", bad, res.Setup.Cache, res.Timings.Stages[2].Stage)
		}
	}
	res = sampleResult("T-0000000A", dispatch.StatusCompleted)
	sum := res.Timings.Summary()
	if want := "dispatch 1.1 s (bot and container start), sandbox 0.1 s, clone 0.4 s, setup 0.8 s (cached), agent 2.6 s (to its first event)"; sum != want {
		t.Errorf("summary\n got %q\nwant %q", sum, want)
	}
	if got := res.Setup.String(); !strings.HasPrefix(got, "setup: cached (restored entry 1a2b3c4d5e6f") {
		t.Errorf("setup line %q", got)
	}
	set := templates.MustLoadEmbedded()
	for name, want := range map[string][]string{
		"github/pr_body":      {"| Start | agent's first step 5s after the request: dispatch 1.1 s", "| Setup | cached — restored entry 1a2b3c4d5e6f"},
		"github/plan_comment": {"<sub>Agent's first step 5s after the request: dispatch 1.1 s", "; setup: cached (restored entry"},
	} {
		var rendered string
		for _, data := range ReplySamples()[name] {
			out, err := set.Render(name, data)
			if err != nil {
				t.Fatal(err)
			}
			rendered += out
		}
		for _, w := range want {
			if !strings.Contains(rendered, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, rendered)
			}
		}
	}
}
