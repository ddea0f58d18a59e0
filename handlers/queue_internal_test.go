package handlers

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// A queued run starts later from what the queue kept, so every field of a
// start request must survive the trip: a field added to startRequest
// without a JSON name would silently start queued runs without it (the
// plan's session, a batch's inline comments).
func TestQueuedRequestKeepsEveryStartField(t *testing.T) {
	t.Parallel()
	var req startRequest
	v := reflect.ValueOf(&req).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x-" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			if e := f.Index(0); e.Kind() == reflect.Struct {
				e.Field(0).SetString("x-" + v.Type().Field(i).Name)
			} else {
				e.SetInt(int64(i + 7))
			}
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
	req.Repo = &github.Repository{FullName: github.String("octo-org/hello")}
	req.Instructions = &dispatch.Comment{Author: "alice", Body: "add a cache"}
	req.Flags = sandboxcfg.Flags{BudgetUSD: 3, TimeoutMinutes: 30, Model: "openai/gpt-5", Harness: "opencode"}

	got := queuedFrom(req, "T-0A1B2C3D", req.Mode, time.Now()).request(req.Repo)
	got.queuedAs = ""
	if !reflect.DeepEqual(got, req) {
		t.Errorf("a queued start request came back different:\n got %+v\nwant %+v", got, req)
	}
}

// A run queued by an earlier version of the bot (the stored JSON names
// are the contract between replicas and across upgrades) still starts.
func TestQueuedRequestReadsTheStoredFormat(t *testing.T) {
	t.Parallel()
	stored := `{"task_id":"T-0A1B2C3D","installation_id":42,"repo":"octo-org/hello","number":7,"is_pr":true,"issue":3,` +
		`"mode":"revise","trigger":"c-9","delivery_id":"d-1","sender":"alice","flags":{"BudgetUSD":2},"plan_task":"T-11111111",` +
		`"feedback":"use the helper","round":2,"branch":"agent/t-x","base_branch":"main","comment_id":9,"command":"revise",` +
		`"instructions":{"author":"alice","body":"add a cache"},"inline":[5,6],"feedback_upto":9,"enqueued_at":"2026-11-24T10:00:00Z"}`
	var q queuedRequest
	if err := json.Unmarshal([]byte(stored), &q); err != nil {
		t.Fatal(err)
	}
	repo := &github.Repository{FullName: github.String("octo-org/hello")}
	got := q.request(repo)
	want := startRequest{InstallationID: 42, Repo: repo, Number: 7, IsPR: true, Issue: 3, Mode: dispatch.ModeRevise, Trigger: "c-9",
		DeliveryID: "d-1", Sender: "alice", Flags: sandboxcfg.Flags{BudgetUSD: 2}, PlanTask: "T-11111111", Feedback: "use the helper",
		Round: 2, Branch: "agent/t-x", BaseBranch: "main", CommentID: 9, Command: "revise",
		Instructions: &dispatch.Comment{Author: "alice", Body: "add a cache"}, Inline: []int64{5, 6}, FeedbackUpto: 9, queuedAs: "T-0A1B2C3D"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stored queue entry read back as\n%+v\nwant\n%+v", got, want)
	}
	if q.Repo != "octo-org/hello" || q.EnqueuedAt.IsZero() {
		t.Errorf("repo %q enqueued %v", q.Repo, q.EnqueuedAt)
	}
}
