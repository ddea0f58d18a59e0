package modeltest

// The OpenAI chat-completions wire format: what a request carries and how
// a turn is written back, whole or streamed.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// chatRequest is the part of an OpenAI chat request the server looks at.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// contentText flattens a message content (a string or a list of parts).
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

// contentImages decodes the data: URLs of a content's image_url parts.
func contentImages(raw json.RawMessage) [][]byte {
	var parts []struct {
		Type     string `json:"type"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out [][]byte
	for _, p := range parts {
		if img, ok := DecodeDataURL(p.ImageURL.URL); ok {
			out = append(out, img)
		}
	}
	return out
}

// DecodeDataURL decodes a base64 data: URL; ok is false for anything else.
func DecodeDataURL(u string) ([]byte, bool) {
	head, data, found := strings.Cut(u, ",")
	if !found || !strings.HasPrefix(head, "data:") || !strings.HasSuffix(head, ";base64") {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(data)
	return b, err == nil
}

// Images returns every image the request carried, in message order.
func (r Request) Images() [][]byte {
	var out [][]byte
	for _, m := range r.Messages {
		out = append(out, m.Images...)
	}
	return out
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError("invalid JSON body: "+err.Error()))
		return
	}
	rec := Request{Time: time.Now(), Model: req.Model, Stream: req.Stream, Turn: -1, Authorization: r.Header.Get("Authorization")}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	for _, m := range req.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), ToolCallID: m.ToolCallID, Images: contentImages(m.Content)}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, tc.Function.Name)
		}
		rec.Messages = append(rec.Messages, msg)
	}

	key := newRetryKey(r.Header.Get("X-Session-Id"), rec.Messages)
	var turn Turn
	s.mu.Lock()
	switch {
	case len(req.Tools) == 0:
		// The agent's side requests (session title, summaries) offer no
		// tools; answering them from the script would make every script
		// depend on the agent's internals.
		rec.Title = true
		turn = Turn{Text: "Scripted session", Usage: Usage{PromptTokens: 10, CompletionTokens: 3}}
	case s.last.repeatedBy(key):
		rec.Turn, rec.Retry = s.last.turn, true
		turn = s.turns[s.last.turn]
	case s.next < len(s.turns):
		rec.Turn = s.next
		turn = s.turns[s.next]
		if turn.plain() {
			s.last = lastTurn{key: key, turn: s.next}
		}
		s.next++
	default:
		s.exhausted++
		turn = Turn{Text: "Script exhausted; stopping.", Usage: Usage{PromptTokens: 10, CompletionTokens: 5}}
	}
	s.requests = append(s.requests, rec)
	s.mu.Unlock()

	if turn.Delay > 0 {
		select {
		case <-time.After(turn.Delay):
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
	if turn.Gate != nil {
		select {
		case <-turn.Gate:
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
	if turn.Status != 0 && turn.Status != http.StatusOK {
		writeJSON(w, turn.Status, apiError(fmt.Sprintf("scripted error %d", turn.Status)))
		return
	}
	model := req.Model
	if model == "" {
		model = s.Model
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, completion(model, turn))
		return
	}
	s.stream(w, r, model, turn)
}

func apiError(msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

func argsString(a any) string {
	switch v := a.(type) {
	case nil:
		return "{}"
	case string:
		return v
	case json.RawMessage:
		return string(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("modeltest: tool call args %T: %v", a, err))
		}
		return string(b)
	}
}

func usageJSON(u Usage) map[string]any {
	m := map[string]any{
		"prompt_tokens":     u.PromptTokens,
		"completion_tokens": u.CompletionTokens,
		"total_tokens":      u.PromptTokens + u.CompletionTokens,
	}
	if u.ReasoningTokens > 0 {
		m["completion_tokens_details"] = map[string]any{"reasoning_tokens": u.ReasoningTokens}
	}
	if u.CachedTokens > 0 {
		m["prompt_tokens_details"] = map[string]any{"cached_tokens": u.CachedTokens}
	}
	return m
}

func finishReason(t Turn) string {
	if len(t.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func callID(i int) string { return fmt.Sprintf("call_%d_%d", time.Now().UnixNano()%1e9, i) }

func completion(model string, t Turn) map[string]any {
	msg := map[string]any{"role": "assistant", "content": t.Text}
	if len(t.ToolCalls) > 0 {
		var calls []any
		for i, tc := range t.ToolCalls {
			calls = append(calls, map[string]any{
				"id": callID(i), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": argsString(tc.Args)},
			})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": "chatcmpl-scripted", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(t)}},
		"usage":   usageJSON(t.Usage),
	}
}

// stream writes a turn as chat.completion.chunk SSE events: the text in a
// few pieces, each tool call's arguments split across chunks (clients must
// reassemble them), the finish reason, then a usage-only chunk.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, model string, t Turn) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	created := time.Now().Unix()
	send := func(choices []any, usage map[string]any) error {
		chunk := map[string]any{"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}
		if usage != nil {
			chunk["usage"] = usage
		}
		b, err := json.Marshal(chunk)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(bw, "data: %s\n\n", b); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}
	}
	if err := send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil); err != nil {
		return
	}
	if t.Stall {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	for _, piece := range split(t.Text, 3) {
		if err := send(delta(map[string]any{"content": piece}, nil), nil); err != nil {
			return
		}
	}
	for i, tc := range t.ToolCalls {
		args := argsString(tc.Args)
		first := map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": callID(i), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}
		if err := send(delta(first, nil), nil); err != nil {
			return
		}
		for _, piece := range split(args, 3) {
			d := map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}
			if err := send(delta(d, nil), nil); err != nil {
				return
			}
		}
	}
	if err := send(delta(map[string]any{}, finishReason(t)), nil); err != nil {
		return
	}
	if err := send([]any{}, usageJSON(t.Usage)); err != nil {
		return
	}
	fmt.Fprint(bw, "data: [DONE]\n\n")
	bw.Flush() //nolint:errcheck // end of stream
	if flusher != nil {
		flusher.Flush()
	}
}

// split cuts s into up to n pieces on rune boundaries, so each streamed
// delta stays valid UTF-8 however the text or the JSON is cut; "" has none.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	runes := []rune(s)
	size := (len(runes) + n - 1) / n
	var out []string
	for len(runes) > 0 {
		k := min(size, len(runes))
		out = append(out, string(runes[:k]))
		runes = runes[k:]
	}
	return out
}

// ErrNoTurn is returned by WaitServed when the context ends first.
var ErrNoTurn = errors.New("modeltest: turn not served before the context ended")
