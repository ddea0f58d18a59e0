package dispatch

import (
	"encoding/json"
	"strings"
	"testing"
)

// A receipt is untrusted output: whatever escapes a CLI or a hostile agent
// put in its texts, the bot reads them without any, so none reaches a
// comment, a PR body or the dashboard.
func TestParseResultStripsTerminalEscapes(t *testing.T) {
	esc := "\x1b[91m\x1b[1mError: \x1b[0mFailed\x1b]0;title\x07"
	r := Result{SchemaVersion: ResultVersion, TaskID: "T-0000ABCD", Mode: ModeExecute, Status: StatusFailed,
		Plan: esc, PRSummary: esc, MediaError: esc, MediaOmitted: []string{esc},
		Commits:    []Commit{{SHA: "abc", Message: esc}},
		Validation: []CheckResult{{Name: esc, Command: esc, OutputTail: esc}},
		Repairs:    []Repair{{FailedChecks: []string{esc}}},
		Session:    &SessionReport{Note: "fresh: " + esc},
		Error:      &RunError{Message: esc, Diagnostic: &Diagnostic{LastEventType: esc}},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(got)
	if strings.Contains(string(out), `\u001b`) || strings.Contains(string(out), `\u0007`) {
		t.Fatalf("escapes survived the read:\n%s", out)
	}
	if got.Session.Note != "fresh: Error: Failed" {
		t.Fatalf("session note %q", got.Session.Note)
	}
}
