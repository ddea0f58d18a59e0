package handlers

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// A queued run starts later from what the queue kept, so every field of a
// start request must survive the trip: a field added to startRequest and
// forgotten here would silently start queued runs without it (the plan's
// session, a batch's inline comments).
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
			f.Index(0).SetInt(int64(i + 7))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
	req.Repo = &github.Repository{FullName: github.String("octo-org/hello")}
	req.Instructions = &dispatch.Comment{Author: "alice", Body: "add a cache"}
	req.Flags = sandboxcfg.Flags{BudgetUSD: 3, TimeoutMinutes: 30, Model: "openai/gpt-5", Harness: "opencode"}

	got := queuedFrom(req, "T-0A1B2C3D", req.Mode, time.Now()).startRequest(req.Repo)
	got.queuedAs = ""
	if !reflect.DeepEqual(got, req) {
		t.Errorf("a queued start request came back different:\n got %+v\nwant %+v", got, req)
	}
}
