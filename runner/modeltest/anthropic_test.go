package modeltest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// anthropicPost sends a Messages request the way the SDK does.
func anthropicPost(t *testing.T, srv *modeltest.AnthropicServer, body map[string]any) *http.Response {
	t.Helper()
	return anthropicPostIn(t, srv, "", body)
}

// anthropicPostIn sends body as Claude Code does in session sid (none when
// empty).
func anthropicPostIn(t *testing.T, srv *modeltest.AnthropicServer, sid string, body map[string]any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages?beta=true", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-secret-value")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if sid != "" {
		req.Header.Set("X-Claude-Code-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type anthropicSSEEvent struct {
	name string
	data map[string]any
}

// anthropicReadSSE reads a whole event stream, checking that each data line's type
// repeats its event name, as the API's do.
func anthropicReadSSE(t *testing.T, r io.Reader) []anthropicSSEEvent {
	t.Helper()
	var out []anthropicSSEEvent
	var name string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data line %q: %v", line, err)
			}
			if d["type"] != name {
				t.Fatalf("event %q carries data of type %v", name, d["type"])
			}
			out = append(out, anthropicSSEEvent{name, d})
		}
	}
	return out
}

var anthropicConversation = map[string]any{
	"model": "claude-sonnet-4-5-20250929", "stream": true, "max_tokens": 1000,
	"tools":    []any{map[string]any{"name": "Write", "input_schema": map[string]any{"type": "object"}}},
	"messages": []any{map[string]any{"role": "user", "content": "write it"}},
}

func TestAnthropicStreamsTextAndToolUse(t *testing.T) {
	input := map[string]any{"file_path": "/w/ünï.txt", "content": strings.Repeat("line\n", 20)}
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{{
		Text:     "Writing the file now.",
		ToolUses: []modeltest.AnthropicToolUse{{Name: "Write", Input: input}},
		Usage:    modeltest.AnthropicUsage{InputTokens: 1234, OutputTokens: 56, CacheReadInputTokens: 7, CacheCreationInputTokens: 8},
	}}})
	resp := anthropicPost(t, srv, anthropicConversation)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := anthropicReadSSE(t, resp.Body)
	var names []string
	for _, e := range evs {
		names = append(names, e.name)
	}
	got := strings.Join(names, " ")
	want := "message_start content_block_start content_block_delta content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	start := evs[0].data["message"].(map[string]any)
	if start["model"] != "claude-sonnet-4-5-20250929" || start["role"] != "assistant" {
		t.Errorf("message_start %v", start)
	}
	if u := start["usage"].(map[string]any); u["input_tokens"] != 1234.0 || u["cache_read_input_tokens"] != 7.0 || u["cache_creation_input_tokens"] != 8.0 {
		t.Errorf("message_start usage %v", u)
	}
	var text, partial strings.Builder
	for _, e := range evs {
		if e.name != "content_block_delta" {
			continue
		}
		d := e.data["delta"].(map[string]any)
		switch d["type"] {
		case "text_delta":
			text.WriteString(d["text"].(string))
		case "input_json_delta":
			partial.WriteString(d["partial_json"].(string))
		}
	}
	if text.String() != "Writing the file now." {
		t.Errorf("text deltas add up to %q", text.String())
	}
	var gotInput map[string]any
	if err := json.Unmarshal([]byte(partial.String()), &gotInput); err != nil || gotInput["file_path"] != "/w/ünï.txt" || gotInput["content"] != input["content"] {
		t.Errorf("input_json_delta chunks add up to %q (%v)", partial.String(), err)
	}
	block := evs[6].data["content_block"].(map[string]any)
	if block["type"] != "tool_use" || block["name"] != "Write" || !strings.HasPrefix(block["id"].(string), "toolu_") {
		t.Errorf("tool_use block start %v", block)
	}
	delta := evs[11].data
	if delta["delta"].(map[string]any)["stop_reason"] != "tool_use" || delta["usage"].(map[string]any)["output_tokens"] != 56.0 {
		t.Errorf("message_delta %v", delta)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Turn != 0 || reqs[0].Side || reqs[0].Path != "/v1/messages" || !reqs[0].Stream {
		t.Fatalf("recorded %+v", reqs)
	}
	if reqs[0].Header.Get("X-Api-Key") != "" || bytes.Contains(reqs[0].Body, []byte("sk-ant-secret")) {
		t.Errorf("the API key was recorded")
	}
	if reqs[0].Header.Get("Anthropic-Version") != "2023-06-01" || reqs[0].UserText() != "write it" || reqs[0].Tools[0] != "Write" {
		t.Errorf("recorded request %+v", reqs[0])
	}
}

func TestAnthropicNonStreamingAndSideRequests(t *testing.T) {
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{
		SideText: "Fix the greeting",
		Turns: []modeltest.AnthropicTurn{
			{ToolUses: []modeltest.AnthropicToolUse{{ID: "toolu_fixed", Name: "Bash", Input: `{"command":"ls"}`}}, Usage: modeltest.AnthropicUsage{InputTokens: 10, OutputTokens: 3}},
			{Text: "done", StopReason: "max_tokens"},
		},
	})
	// A request without tools is not the anthropicConversation: it gets the side
	// answer and the script does not move.
	side := anthropicPost(t, srv, map[string]any{"model": "claude-haiku-4-5", "stream": false, "max_tokens": 50,
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "title?"}}}}})
	var msg struct {
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text, ID, Name string
			Input                map[string]any
		} `json:"content"`
		Usage map[string]int64 `json:"usage"`
	}
	if err := json.NewDecoder(side.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Model != "claude-haiku-4-5" || len(msg.Content) != 1 || msg.Content[0].Text != "Fix the greeting" || srv.Served() != 0 {
		t.Fatalf("side answer %+v, served %d", msg, srv.Served())
	}

	body := map[string]any{}
	for k, v := range anthropicConversation {
		body[k] = v
	}
	body["stream"] = false
	resp := anthropicPost(t, srv, body)
	msg.Content = nil
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].ID != "toolu_fixed" || msg.Content[0].Input["command"] != "ls" || msg.Usage["output_tokens"] != 3 {
		t.Errorf("non-streaming turn %+v", msg)
	}
	// The next anthropicConversation request carries the tool result.
	body["messages"] = []any{
		map[string]any{"role": "user", "content": "go"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_fixed", "name": "Bash", "input": map[string]any{"command": "ls"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_fixed", "is_error": true,
			"content": []any{map[string]any{"type": "text", "text": "ls: denied"}}}}},
	}
	resp = anthropicPost(t, srv, body)
	msg.Content = nil
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "max_tokens" || msg.Content[0].Text != "done" {
		t.Errorf("second turn %+v", msg)
	}
	res := srv.ScriptedRequests()[1].ToolResults()
	if len(res) != 1 || res[0].ToolUseID != "toolu_fixed" || !res[0].IsError || res[0].Text != "ls: denied" {
		t.Errorf("tool results %+v", res)
	}

	// Past the script: a short final answer, counted.
	resp = anthropicPost(t, srv, body)
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || srv.Exhausted() != 1 || srv.Served() != 2 {
		t.Errorf("past the script: status %d, exhausted %d, served %d", resp.StatusCode, srv.Exhausted(), srv.Served())
	}
	var side2 int
	for _, r := range srv.Requests() {
		if r.Side {
			side2++
		}
	}
	if side2 != 1 || len(srv.Requests()) != 4 {
		t.Errorf("%d side requests of %d", side2, len(srv.Requests()))
	}
}

func TestAnthropicErrorsAndOtherEndpoints(t *testing.T) {
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Error: &modeltest.AnthropicError{Status: 529, Message: "busy"}},
	}})
	resp := anthropicPost(t, srv, anthropicConversation)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 529 || e.Type != "error" || e.Error.Type != "overloaded_error" || e.Error.Message != "busy" {
		t.Errorf("error turn: %d %+v", resp.StatusCode, e)
	}

	r, err := http.Post(srv.URL+"/v1/messages/count_tokens", "application/json", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(r.Body).Decode(&count); err != nil || r.StatusCode != 200 || count.InputTokens <= 0 {
		t.Errorf("count_tokens: %d %+v %v", r.StatusCode, count, err)
	}
	r.Body.Close()
	head, err := http.Head(srv.URL + "/api/hello")
	if err != nil || head.StatusCode != 200 {
		t.Errorf("HEAD probe: %v %v", head, err)
	}
	r, err = http.Post(srv.URL+"/v1/files", "application/json", nil)
	if err != nil || r.StatusCode != 404 {
		t.Errorf("unknown endpoint: %v %v", r, err)
	}
	r.Body.Close()
	var paths []string
	for _, req := range srv.Requests() {
		paths = append(paths, req.Method+" "+req.Path)
	}
	if strings.Join(paths, ",") != "POST /v1/messages,POST /v1/messages/count_tokens,HEAD /api/hello,POST /v1/files" {
		t.Errorf("recorded %v", paths)
	}
}

func TestAnthropicStallAndScriptErrors(t *testing.T) {
	if _, err := modeltest.NewAnthropic("127.0.0.1:0", modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{ToolUses: []modeltest.AnthropicToolUse{{Name: "Bash", Input: "{not json"}}},
	}}); err == nil || !strings.Contains(err.Error(), "turn 0, tool Bash") {
		t.Errorf("a tool input that is not JSON: err = %v", err)
	}
	if _, err := modeltest.NewAnthropic("256.0.0.1:0", modeltest.AnthropicScript{}); err == nil {
		t.Errorf("listening on a bad address did not fail")
	}

	srv, err := modeltest.NewAnthropic("127.0.0.1:0", modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{{Stall: true}}})
	if err != nil {
		t.Fatal(err)
	}
	resp := anthropicPost(t, srv, anthropicConversation)
	first := make(chan string, 1)
	rest := make(chan error, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		line, _ := br.ReadString('\n')
		first <- line
		_, err := io.Copy(io.Discard, br)
		rest <- err
	}()
	if line := <-first; line != "event: message_start\n" {
		t.Fatalf("first line %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.WaitServed(ctx, 1); err != nil {
		t.Fatal(err)
	}
	srv.Close() // must release the stalled stream, not wait on it
	if err := <-rest; err != nil {
		t.Logf("stalled stream ended with %v", err)
	}
}

// Claude Code retrying a request whose answer it did not finish reading
// sends the same conversation in the same session: it gets the same turn
// and the script does not move; another session, or a retry after an error
// turn, goes on down the script.
func TestAnthropicRetryGetsTheSameTurn(t *testing.T) {
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "one"}, {Text: "two"}, {Error: &modeltest.AnthropicError{Status: http.StatusBadRequest, Message: "no"}}, {Text: "four"},
	}})
	ask := func(sid string, users ...string) string {
		var msgs []any
		for _, u := range users {
			msgs = append(msgs, map[string]any{"role": "user", "content": u})
		}
		resp := anthropicPostIn(t, srv, sid, map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": msgs,
			"tools": []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}}})
		var msg struct {
			Content []struct{ Text string } `json:"content"`
		}
		if resp.StatusCode != http.StatusOK {
			return resp.Status
		}
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || len(msg.Content) == 0 {
			t.Fatalf("answer: %v %+v", err, msg)
		}
		return msg.Content[0].Text
	}
	steps := []struct {
		sid   string
		users []string
		want  string
	}{
		{"s-a", []string{"plan"}, "one"},
		{"s-a", []string{"plan"}, "one"}, // the retry
		{"s-b", []string{"plan"}, "two"}, // another session, the same words
		{"s-b", []string{"plan", "more"}, "400"},
		{"s-b", []string{"plan", "more"}, "four"}, // a retry after an error is answered afresh
	}
	for i, st := range steps {
		if got := ask(st.sid, st.users...); !strings.Contains(got, st.want) {
			t.Fatalf("step %d (%s %q): answered %q, want %q", i, st.sid, st.users, got, st.want)
		}
	}
	if srv.Served() != 4 {
		t.Errorf("served %d turns, want 4 (the retry took none)", srv.Served())
	}
	if reqs := srv.Requests(); !reqs[1].Retry || reqs[1].Turn != 0 || reqs[2].Retry {
		t.Errorf("recorded: %+v", reqs[:3])
	}
}
