package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/gateway"
)

// The runner learns when the agent's first model request left: a waiter
// at NextRequestPath is answered by the next forwarded request with its
// time and provider, and by nothing else.
func TestNextRequestAnswersTheWaiterWithTheNextModelRequest(t *testing.T) {
	up := newUpstream(t)
	gw := serve(t, dispatch.GatewayProvider{Name: "oa", BaseURL: up.URL + "/v1", API: dispatch.APIOpenAI, Key: openAIKey})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type answer struct {
		nr  gateway.NextRequest
		err error
	}
	got := make(chan answer, 1)
	before := time.Now()
	go func() {
		nr, err := gateway.WaitNextRequest(ctx, gw.URL, before)
		got <- answer{nr, err}
	}()
	// A refused request is not a model request: it wakes nobody.
	if code, _ := do(t, http.MethodPost, gw.URL+"/oa/files", nil, "{}"); code != http.StatusForbidden {
		t.Fatalf("POST /oa/files = %d, want 403", code)
	}
	// Whether the waiter's GET reached the gateway before this request
	// or after, it is answered with this one: the gateway keeps recent
	// requests for a waiter that comes late.
	if code, _ := do(t, http.MethodPost, gw.URL+"/oa/chat/completions", nil, "{}"); code != http.StatusOK {
		t.Fatalf("model request = %d", code)
	}
	after := time.Now()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.nr.Provider != "oa" || a.nr.Time.Before(before) || a.nr.Time.After(after) {
		t.Fatalf("next request = %+v, want provider oa between %s and %s", a.nr, before, after)
	}
	if _, _ = do(t, http.MethodPost, gw.URL+"/oa/chat/completions", nil, "{}"); up.count() != 2 {
		t.Fatalf("upstream saw %d requests, want 2", up.count())
	}
	// A later waiter whose since is past gets the same first one, not the
	// second.
	again, err := gateway.WaitNextRequest(ctx, gw.URL, before)
	if err != nil || !again.Time.Equal(a.nr.Time) {
		t.Fatalf("a late waiter got %+v, %v; want %+v", again, err, a.nr)
	}
}

func TestNextRequestWaiterEndsWithItsContext(t *testing.T) {
	gw := serve(t, dispatch.GatewayProvider{Name: "oa", BaseURL: "http://127.0.0.1:1/v1", API: dispatch.APIOpenAI, Key: openAIKey})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gateway.WaitNextRequest(ctx, gw.URL, time.Now()); err == nil {
		t.Fatal("a canceled wait returned no error")
	}
}
