package app

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// TestLiveEventsStreamFromTheBackend: the stream replays the run's lines
// from the backend, resumes after Last-Event-ID, never shows a credential,
// and ends with the receipt; people who may not see the run get 404 and a
// browser without a session 401.
func TestLiveEventsStreamFromTheBackend(t *testing.T) {
	t.Parallel()
	f, _, task := startPreview(t)
	mem := f.backend.(previewBackend)
	mem.Emit(task, dispatch.Progress{Stage: "clone", Message: "cloning"})
	mem.Emit(task, dispatch.Progress{Stage: "agent", Message: "tool bash", Tool: "bash", Kind: dispatch.KindTool,
		Detail: `{"command":"curl -H 'Authorization: token ghs_0123456789abcdefABCDEF' x"}`, ToolCalls: 1, CostUSD: 0.01})
	alice := f.signedInClient("alice")
	req, _ := http.NewRequest("GET", f.http.URL+"/runs/"+task+"/events", nil)
	req.Header.Set("Last-Event-ID", "1")
	alice.Timeout = 20 * time.Second
	resp, err := alice.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	next := func(event string) string {
		t.Helper()
		var id, ev string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && ev == event:
				return id + " " + strings.TrimPrefix(line, "data: ")
			}
		}
		t.Fatalf("the stream ended before a %q event: %v", event, sc.Err())
		return ""
	}
	first := next("progress")
	if !strings.HasPrefix(first, "2 ") || strings.Contains(first, "ghs_0123") || !strings.Contains(first, "[REDACTED]") {
		t.Errorf("after Last-Event-ID 1 the first line is %s; want line 2, its token redacted", first)
	}
	mem.Emit(task, dispatch.Progress{Stage: "done", Message: "completed"})
	if l := next("progress"); !strings.HasPrefix(l, "3 ") || !strings.Contains(l, `"stage":"done"`) {
		t.Errorf("a line written while the page is open: %s", l)
	}
	mem.Finish(task, &dispatch.Result{TaskID: task, Status: dispatch.StatusCompleted, Validation: []dispatch.CheckResult{{Name: "test", Passed: true, Attempts: 1}}})
	if r := next("receipt"); !strings.Contains(r, `"status":"completed"`) || !strings.Contains(r, `"name":"test"`) {
		t.Errorf("receipt: %s", r)
	}
	next("end")

	bob := f.signedInClient("bob")
	if resp, err := bob.Get(f.http.URL + "/runs/" + task + "/events"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob: %v %v, want 404", resp.StatusCode, err)
	}
	if resp, err := http.Get(f.http.URL + "/runs/" + task + "/events"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no session: %v %v, want 401", resp.StatusCode, err)
	}
}
