package handlers

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// The templates of /status and of the mention reply render with their
// typed data, in every shape the handlers fill in.
func TestStatusAndMentionRepliesRender(t *testing.T) {
	t.Parallel()
	set := templates.MustLoadEmbedded()
	for _, tc := range []struct {
		name string
		data any
		want []string
	}{
		{"github/status", StatusData{TaskID: "T-00000001", Mode: dispatch.ModeExecute, Running: true, Stage: "validate", Message: "go test", Elapsed: "3m0s", CostUSD: 0.5, HasCost: true, CheckURL: "https://github.com/o/r/runs/1"},
			[]string{"The execute run `T-00000001` is running here (3m0s so far).", "Stage: `validate` — go test", "Cost so far: $0.50", "Check run: https://github.com/o/r/runs/1"}},
		{"github/status", StatusData{TaskID: "T-00000001", Running: true}, []string{"The run `T-00000001` is running here."}},
		{"github/status", StatusData{TaskID: "T-00000003", Mode: dispatch.ModePlan, Running: true, Place: 1, Elapsed: "2m0s"},
			[]string{"The plan run `T-00000003` is waiting for a slot here: next in line (queued 2m0s ago)."}},
		{"github/status", StatusData{TaskID: "T-00000002", Mode: dispatch.ModePlan, Outcome: "failed", Elapsed: "1m0s", ResultURL: "https://x/1", PlanURL: "https://x/0"},
			[]string{"The last run here, `T-00000002` (plan), failed after 1m0s.", "- Plan: https://x/0", "- Result: https://x/1"}},
		{"github/mention_other_pr", TableReplyData{Slug: "my-bot", TriggerLabel: "agent"}, []string{"mention @my-bot on an issue", "label it `agent`"}},
	} {
		out, err := set.Render(tc.name, tc.data)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) || strings.Contains(out, "<no value>") {
				t.Errorf("%s rendered without %q:\n%s", tc.name, w, out)
			}
		}
	}
}
