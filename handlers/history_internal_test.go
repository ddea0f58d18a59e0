package handlers

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// A PR opened before the bot kept a history gets the section appended;
// later runs replace it in place and keep the rest of the body; a run
// recorded twice (a retried post) is listed once.
func TestHistorySectionRoundTrip(t *testing.T) {
	t.Parallel()
	set, err := templates.Load("")
	if err != nil {
		t.Fatal(err)
	}
	c := &core{Wiring: &Wiring{Templates: set}}
	body := "<!-- sandbox-bot:{\"kind\":\"pr\",\"task\":\"T-1\"} -->\nSummary.\n\nCloses #1"
	exec := RunEntry{TaskID: "T-00000001", Mode: dispatch.ModeExecute, Attempt: 1, Status: dispatch.StatusCompleted, CostUSD: 1.25, Steps: 9}
	rev := RunEntry{TaskID: "T-00000002", Mode: dispatch.ModeRevise, Attempt: 1, Status: dispatch.StatusFailed, CostUSD: 0.5, Steps: 3, URL: "https://x/c/1"}
	for _, e := range []RunEntry{exec, rev, rev} {
		runs, _ := withEntry(parseHistory(body), e)
		section, err := c.renderHistory(runs)
		if err != nil {
			t.Fatal(err)
		}
		body = spliceHistory(body, section)
	}
	if got := parseHistory(body); len(got) != 2 || got[0] != exec || got[1] != rev {
		t.Fatalf("history read back: %+v", got)
	}
	for _, want := range []string{"Closes #1", "**Total: $1.75** over 2 runs", "[`T-00000002`](https://x/c/1)"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if strings.Count(body, historyStart) != 1 || strings.Count(body, historyEnd) != 1 {
		t.Errorf("want one history section:\n%s", body)
	}
	if m, ok := markers.Parse(body); !ok || m.Kind != markers.KindPR {
		t.Errorf("the PR marker must stay the body's first marker, got %+v", m)
	}
}
