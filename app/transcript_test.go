package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

// eventStream reads a run's Server-Sent Events.
type eventStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

func openEvents(t *testing.T, c *http.Client, url, lastID string) *eventStream {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	return &eventStream{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next event's name, id and data.
func (s *eventStream) next() (event, id, data string) {
	s.t.Helper()
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			return event, id, strings.TrimPrefix(line, "data: ")
		}
	}
	s.t.Fatalf("the stream ended: %v", s.sc.Err())
	return
}

// The bot keeps every line of a run as its follower reads it, with no page
// open: once the sandbox is gone (the backend has forgotten the run) the
// run's page streams the kept lines, numbered as they were live, so a
// browser that reconnects with Last-Event-ID gets what followed and
// nothing twice; the lines are redacted as the live page redacts them;
// the whole transcript downloads as NDJSON under the page's access rules,
// and the page names the issue by its title, escaped.
func TestTranscriptOutlivesTheSandbox(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	mem := backendtest.NewMemory()
	f.backend = mem
	f.start()
	n := f.gh.AddIssue("octo/alpha", "alice", `Cache <img src=x onerror=alert(1)> the client`, "")
	const task = "T-0F0F0F01"
	meta := dispatch.Meta{TaskID: task, Mode: dispatch.ModePlan, Repo: "octo/alpha", RepoID: f.ids["octo/alpha"], Number: n, InstallationID: 1, Attempt: 1}
	order := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: task, Mode: dispatch.ModePlan, Repo: "octo/alpha", Number: n,
		CloneURL: "https://example.invalid/octo/alpha.git", BaseBranch: "main", BudgetUSD: 1, TimeoutMinutes: 5}
	if _, err := mem.Submit(t.Context(), dispatch.RunSpec{Meta: meta, Order: order}); err != nil {
		t.Fatal(err)
	}
	f.srv.Load().Base().Runs.Follow(meta)
	mem.Emit(task, dispatch.Progress{Stage: "clone", Message: "cloning"})
	mem.Emit(task, dispatch.Progress{Stage: "agent", Kind: dispatch.KindTool, Tool: "bash", ToolCalls: 1,
		Detail: "curl -H 'Authorization: token ghp_0123456789abcdefABCDEF0123' \x1b[31mx\x1b[0m"})
	alice := f.signedInClient("alice")
	alice.Timeout = 20 * time.Second
	events := f.http.URL + "/runs/" + task + "/events"

	// alice watches the first two lines live, then loses the stream.
	live := openEvents(t, alice, events, "")
	for want := 1; want <= 2; want++ {
		if ev, id, _ := live.next(); ev != "progress" || id != string(rune('0'+want)) {
			t.Fatalf("live event %s %s, want progress %d", ev, id, want)
		}
	}
	live.resp.Body.Close()
	// The run goes on and ends with nobody watching; its sandbox goes.
	mem.Emit(task, dispatch.Progress{Stage: "done", Message: "plan written", Status: dispatch.StatusCompleted})
	mem.Finish(task, &dispatch.Result{TaskID: task, Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Cache.",
		TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.25, Steps: 2}})
	f.gh.WaitFor(10*time.Second, "the run cleaned up from the backend", func() bool {
		_, err := mem.Status(t.Context(), task)
		return errors.Is(err, dispatch.ErrNotFound)
	})

	// Her browser reconnects after line 2: line 3 from the store, the
	// receipt, the end.
	again := openEvents(t, alice, events, "2")
	if ev, id, data := again.next(); ev != "progress" || id != "3" || !strings.Contains(data, `"stage":"done"`) {
		t.Errorf("after Last-Event-ID 2 with the sandbox gone: %s %s %s; want line 3 from the store", ev, id, data)
	}
	if ev, _, data := again.next(); ev != "receipt" || !strings.Contains(data, `"status":"completed"`) || !strings.Contains(data, `"cost_usd":0.25`) {
		t.Errorf("then %s %s; want the receipt", ev, data)
	}
	if ev, _, _ := again.next(); ev != "end" {
		t.Errorf("then %s; want the end", ev)
	}
	again.resp.Body.Close()

	// The whole transcript, as NDJSON.
	resp, err := alice.Get(f.http.URL + "/runs/" + task + "/transcript")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson; charset=utf-8" || resp.Header.Get("X-Transcript") != "whole" {
		t.Fatalf("transcript: %d %v", resp.StatusCode, resp.Header)
	}
	var seqs []int
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var ev liveEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", l, err)
		}
		seqs = append(seqs, ev.Seq)
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Errorf("transcript lines %v; want 1, 2, 3 once each", seqs)
	}
	if strings.Contains(string(body), "ghp_0123") || strings.Contains(string(body), "\x1b") || strings.Contains(string(body), `\u001b`) ||
		!strings.Contains(string(body), "[REDACTED]") {
		t.Errorf("the kept lines hold a token or a terminal escape:\n%s", body)
	}

	// The page names the issue by its title, as text.
	resp, err = alice.Get(f.http.URL + "/runs/" + task)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `<span id="title">Cache &lt;img src=x onerror=alert(1)&gt; the client</span>`) || strings.Contains(string(page), "<img src=x") {
		t.Errorf("the page does not show the issue's title escaped:\n%s", page)
	}

	// Past the retention the transcript goes and the receipt stays: the
	// page says so.
	st := f.store()
	if p, err := st.Prune(t.Context(), time.Now().Add(time.Hour)); err != nil || p.Transcripts != 1 || p.Lines != 3 {
		t.Fatalf("prune: %+v %v", p, err)
	}
	st.Close()
	resp, err = alice.Get(f.http.URL + "/runs/" + task)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "no longer kept: transcripts are kept for 90 days") || !strings.Contains(string(page), `id="r-status">completed`) {
		t.Errorf("the page of a pruned run lacks the note or its receipt:\n%s", page)
	}
	if resp, err := alice.Get(f.http.URL + "/runs/" + task + "/transcript"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the transcript of a pruned run: %v %v, want 404", resp.StatusCode, err)
	}

	// bob reads another repository: nothing; no session: 401.
	if resp, err := f.signedInClient("bob").Get(f.http.URL + "/runs/" + task + "/transcript"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's transcript: %v %v, want 404", resp.StatusCode, err)
	}
	if resp, err := http.Get(f.http.URL + "/runs/" + task + "/transcript"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no session: %v %v, want 401", resp.StatusCode, err)
	}
}

// logCut is a backend whose log of a run gives this replica's page none
// of its lines: the sandbox goes under the read. The run's follower (here
// or on another replica) removes it once every line is kept, and a page's
// feed that starts late (a bot restarted as the run ended, a loaded
// machine) finds the log gone. cut runs as the feed asks for the log.
type logCut struct {
	*backendtest.Memory
	cut func(taskID string)
}

func (b logCut) Wait(ctx context.Context, taskID string, _ func(dispatch.Progress)) (dispatch.RunStatus, error) {
	b.cut(taskID)
	return dispatch.RunStatus{}, dispatch.ErrNotFound
}

// A page whose feed of the backend's log ends short, because the sandbox
// went under the read, gets the rest from the store: every line once,
// numbered as they were live, then the receipt and the end. Found by the
// e2e test of the live page under load: a browser that came back to a
// restarted bot as the run ended showed the receipt and no line.
func TestAPageGetsFromTheStoreWhatTheGoneLogDidNotGive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		ended bool // the run has ended when the page asks
	}{
		{"the run ended, its sandbox going", true},
		{"the run live when the page asks, gone under the read", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newDashFixture(t)
			mem := backendtest.NewMemory()
			task := "T-0F0F0F02"
			if c.ended {
				task = "T-0F0F0F03"
			}
			res := &dispatch.Result{TaskID: task, Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, TokenUsage: dispatch.TokenUsage{Steps: 2}}
			f.backend = logCut{Memory: mem, cut: func(id string) { mem.Finish(id, res) }}
			f.start()
			meta := dispatch.Meta{TaskID: task, Mode: dispatch.ModePlan, Repo: "octo/alpha", RepoID: f.ids["octo/alpha"], Number: 1, InstallationID: 1, Attempt: 1}
			order := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: task, Mode: dispatch.ModePlan, Repo: "octo/alpha", Number: 1,
				CloneURL: "https://example.invalid/octo/alpha.git", BaseBranch: "main", BudgetUSD: 1, TimeoutMinutes: 5}
			if _, err := mem.Submit(t.Context(), dispatch.RunSpec{Meta: meta, Order: order}); err != nil {
				t.Fatal(err)
			}
			// The run's follower kept its three lines.
			st := f.store()
			if err := st.Begin(t.Context(), receipts.Head{TaskID: task, Repo: meta.Repo, RepoID: meta.RepoID, InstallationID: 1, Number: 1, Mode: "plan"}); err != nil {
				t.Fatal(err)
			}
			var lines []receipts.Line
			for i, stage := range []string{"clone", "agent", "done"} {
				lines = append(lines, receipts.Line{Seq: i + 1, Data: []byte(fmt.Sprintf(`{"seq":%d,"stage":%q}`, i+1, stage))})
			}
			if _, err := st.Append(t.Context(), task, lines); err != nil {
				t.Fatal(err)
			}
			st.Close()
			if c.ended {
				mem.Finish(task, res)
			}

			alice := f.signedInClient("alice")
			alice.Timeout = 20 * time.Second
			page := openEvents(t, alice, f.http.URL+"/runs/"+task+"/events", "")
			defer page.resp.Body.Close()
			for want := 1; want <= 3; want++ {
				if ev, id, _ := page.next(); ev != "progress" || id != strconv.Itoa(want) {
					t.Fatalf("event %s %s; want line %d from the store", ev, id, want)
				}
			}
			if ev, _, data := page.next(); ev != "receipt" || !strings.Contains(data, `"status":"completed"`) {
				t.Errorf("then %s %s; want the receipt", ev, data)
			}
			if ev, _, _ := page.next(); ev != "end" {
				t.Errorf("then %s; want the end", ev)
			}
		})
	}
}

// brokenLines is a store whose transcript lines cannot be read, with the
// kind of error a database driver gives.
type brokenLines struct {
	receipts.Store
	head receipts.Head
}

func (b brokenLines) Head(context.Context, string) (receipts.Head, error) { return b.head, nil }
func (b brokenLines) Lines(context.Context, string, int, int) ([]receipts.Line, error) {
	return nil, errors.New(`pq: password authentication failed for user "sandbox" at db.internal:5432 (relation transcript_lines)`)
}

// A store that fails is the operator's to read about in the log: the
// transcript's viewer gets a 500 that says what to do, not the driver's
// words (hosts, users, tables).
func TestTranscriptHidesTheStoresError(t *testing.T) {
	t.Parallel()
	st, err := receipts.Open(t.Context(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const task = "T-0F0F0F02"
	store := brokenLines{Store: st, head: receipts.Head{TaskID: task, Repo: "octo/alpha", RepoID: 7, Mode: "plan"}}
	lp := newLivePages(backendtest.NewMemory(), store, time.Hour, nil, zerolog.Nop())
	req := httptest.NewRequest("GET", "/runs/"+task+"/transcript", nil)
	req.SetPathValue("task", task)
	rec := httptest.NewRecorder()
	lp.transcript(rec, req, viewer{Login: "operator"})
	body := rec.Body.String()
	if rec.Code != http.StatusInternalServerError || strings.Contains(body, "pq:") || strings.Contains(body, "db.internal") || !strings.Contains(body, "try again") {
		t.Errorf("a store that fails: %d %q, want a 500 without the driver's words", rec.Code, body)
	}
}
