// Package modeltest holds scripted model servers for tests: an
// OpenAI-compatible chat-completions endpoint (this file) that the real
// OpenCode CLI talks to, and an Anthropic Messages endpoint for Claude Code.
// A test writes the conversation as a list of turns; the server plays them
// back in order, streaming them the way a real provider does, so the agent
// CLI runs its real tool loop (it really edits files) without a network.
package modeltest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// ModelID is the model name the scripted server answers to by default.
const ModelID = "scripted-1"

// ProviderID is the provider name used in the generated opencode.json.
const ProviderID = "scripted"

// ToolCall is one function call the scripted model makes.
type ToolCall struct {
	Name string
	// Args is marshalled to the JSON arguments string; a string or
	// json.RawMessage is sent as is.
	Args any
}

// Usage is what the model reports for one turn.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	ReasoningTokens  int64
	CachedTokens     int64
}

// Turn is one assistant response.
type Turn struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// Stall sends the first chunk and then nothing until the client goes
	// away or the server closes: a model that hangs mid-stream.
	Stall bool
	// Delay waits before the first byte, for slow-model scenarios.
	Delay time.Duration
	// Status, when not 0 or 200, answers with that HTTP status and an
	// OpenAI-style error body instead of a stream.
	Status int
}

// Request is what the server received, recorded for assertions.
type Request struct {
	Time     time.Time
	Model    string
	Stream   bool
	Tools    []string // tool names offered
	Messages []Message
	// Title is true for side requests that did not consume a turn (the
	// agent's session-title request, which offers no tools).
	Title bool
	// Turn is the index of the scripted turn answered, -1 for side requests
	// and past the end of the script.
	Turn int
	// Authorization is the header as received, so a test can assert which
	// key reached the provider (through the model gateway, for one).
	Authorization string
}

// Message is one chat message of a request, flattened to text.
type Message struct {
	Role       string
	Content    string
	ToolCallID string
	ToolCalls  []string // names of tool calls (assistant messages)
	// Images are the decoded data: URLs of the message's image parts
	// (an agent passing a screenshot back to the model).
	Images [][]byte
}

// LastUser returns the last user message's text.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// ToolResults returns the contents of the tool messages of the request.
func (r Request) ToolResults() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// Server is a scripted OpenAI-compatible chat-completions server.
type Server struct {
	// URL is the base URL ending in /v1, what options.baseURL wants.
	URL string
	// Model is the model id the script plays as.
	Model string

	srv      *http.Server
	ln       net.Listener
	stop     chan struct{}
	stopOnce sync.Once

	mu        sync.Mutex
	turns     []Turn
	next      int
	requests  []Request
	exhausted int
}

// New starts a server on addr ("127.0.0.1:0" for any free port; the docker0
// gateway address when a container must reach it). Close it when done.
func New(addr string, script []Turn) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("modeltest: listen on %s: %w", addr, err)
	}
	s := &Server{
		URL:   "http://" + ln.Addr().String() + "/v1",
		Model: ModelID,
		ln:    ln,
		stop:  make(chan struct{}),
		turns: append([]Turn(nil), script...),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", s.models)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns on Close
	return s, nil
}

// Start starts a server on loopback and closes it when the test ends.
func Start(t testing.TB, script []Turn) *Server {
	t.Helper()
	s, err := New("127.0.0.1:0", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close releases stalled streams and stops the server.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
}

// Append adds turns to the end of the script, for tests that decide the
// next answers after seeing the first part of a run.
func (s *Server) Append(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ScriptedRequests returns the requests that were answered with a turn.
func (s *Server) ScriptedRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Turn >= 0 {
			out = append(out, r)
		}
	}
	return out
}

// Served is the number of scripted turns played so far.
func (s *Server) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// Exhausted counts requests that arrived after the script ran out; they are
// answered with a short final text so the agent ends instead of hanging.
func (s *Server) Exhausted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exhausted
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   []any{map[string]any{"id": s.Model, "object": "model", "owned_by": "modeltest"}},
	})
}

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

	var turn Turn
	s.mu.Lock()
	switch {
	case len(req.Tools) == 0:
		// The agent's side requests (session title, summaries) offer no
		// tools; answering them from the script would make every script
		// depend on the agent's internals.
		rec.Title = true
		turn = Turn{Text: "Scripted session", Usage: Usage{PromptTokens: 10, CompletionTokens: 3}}
	case s.next < len(s.turns):
		rec.Turn = s.next
		turn = s.turns[s.next]
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

// split cuts s into at most n pieces of similar size on rune boundaries.
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

// WaitServed blocks until at least n scripted turns were served.
func (s *Server) WaitServed(ctx context.Context, n int) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.Served() >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ErrNoTurn
		case <-tick.C:
		}
	}
}
