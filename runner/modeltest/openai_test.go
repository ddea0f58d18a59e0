package modeltest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// openAIPost sends a non-streaming chat request in session sid with the
// given user messages and returns the answer's text.
func openAIPost(t *testing.T, srv *modeltest.Server, sid string, users ...string) string {
	t.Helper()
	var msgs []any
	for _, u := range users {
		msgs = append(msgs, map[string]any{"role": "user", "content": u})
	}
	body, _ := json.Marshal(map[string]any{"model": srv.Model, "messages": msgs,
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "parameters": map[string]any{}}}}})
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "status " + resp.Status
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return out.Choices[0].Message.Content
}

// An agent that retries a request whose answer it did not finish reading
// (OpenCode does, when the stream's connection closes) sends the same
// conversation in the same session again: it gets the same turn, and the
// script does not move. Another session, a longer conversation, or a retry
// after an error turn goes on down the script.
func TestOpenAIRetryGetsTheSameTurn(t *testing.T) {
	srv := modeltest.Start(t, []modeltest.Turn{
		{Text: "one"}, {Text: "two"}, {Status: http.StatusBadRequest}, {Text: "four"}, {Text: "five"},
	})
	steps := []struct{ sid, users, want string }{
		{"ses_a", "plan", "one"},
		{"ses_a", "plan", "one"},             // the retry
		{"ses_b", "plan", "two"},             // another session, the same words
		{"ses_b", "plan|more", "status 400"}, // the conversation went on
		{"ses_b", "plan|more", "four"},       // a retry after an error is answered afresh
		{"", "plan|more", "five"},            // no session: never taken for a retry
	}
	for i, s := range steps {
		if got := openAIPost(t, srv, s.sid, strings.Split(s.users, "|")...); !strings.Contains(got, s.want) {
			t.Fatalf("step %d (%s %q): answered %q, want %q", i, s.sid, s.users, got, s.want)
		}
	}
	if srv.Served() != 5 {
		t.Errorf("served %d turns, want 5 (the retry took none)", srv.Served())
	}
	if reqs := srv.Requests(); !reqs[1].Retry || reqs[1].Turn != 0 || reqs[2].Retry {
		t.Errorf("recorded: %+v", reqs[:3])
	}
}
