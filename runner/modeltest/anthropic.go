package modeltest

// A scripted Anthropic Messages API (POST /v1/messages) for the real Claude
// Code CLI: ANTHROPIC_BASE_URL points at it, any ANTHROPIC_API_KEY works.
// Conversation requests (those offering tools) are answered with the next
// scripted turn, streamed as the real API streams it: message_start,
// content_block_start/delta/stop per block (text_delta, input_json_delta in
// several chunks), message_delta with stop_reason and usage, message_stop.
// Requests that are not part of the conversation (no tools: a title, a
// quota probe, a summary) get a short answer and consume no turn.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// AnthropicModelID is a model Claude Code knows the price of, so the
// `result` event's total_cost_usd is computed from the scripted usage
// ($3 per million input tokens, $15 per million output tokens).
const AnthropicModelID = "claude-sonnet-4-5-20250929"

// AnthropicToolUse is one tool call the scripted model makes.
type AnthropicToolUse struct {
	// ID is the tool_use id; empty generates a unique one.
	ID   string
	Name string
	// Input is marshalled to the tool's JSON input; a string or
	// json.RawMessage is sent as is.
	Input any
}

// AnthropicUsage is what the model reports for one turn.
type AnthropicUsage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
}

// AnthropicError makes a turn answer with an API error instead of a message.
type AnthropicError struct {
	Status  int    // HTTP status, e.g. 400, 429, 529
	Type    string // error.type, e.g. "invalid_request_error"; derived from Status when empty
	Message string
}

// AnthropicTurn is one assistant response. Text comes first, then the tool
// calls, each as its own content block, as the real model orders them.
type AnthropicTurn struct {
	Text     string
	ToolUses []AnthropicToolUse
	Usage    AnthropicUsage
	// StopReason defaults to "tool_use" when the turn calls tools, else
	// "end_turn".
	StopReason string
	// Error answers with an error body and status instead of a message.
	// Claude Code retries 429 and 5xx with back-off, so tests use 4xx.
	Error *AnthropicError
	// Stall sends message_start and then nothing until the client goes
	// away or the server closes: a model that hangs mid-stream.
	Stall bool
}

// plain is a turn answered at once and in full: the only kind a repeated
// request gets again (see lastTurn), as Turn.plain is for the OpenAI server.
func (t AnthropicTurn) plain() bool { return !t.Stall && t.Error == nil }

// AnthropicScript is what the server plays.
type AnthropicScript struct {
	Turns []AnthropicTurn
	// SideText answers requests that are not part of the conversation;
	// empty means "OK".
	SideText string
}

// AnthropicRequest is what the server received, recorded for assertions.
// The credential headers are kept apart from Header, in APIKey and
// Authorization, so a test asserts which key reached the provider.
type AnthropicRequest struct {
	Time          time.Time
	APIKey        string // x-api-key
	Authorization string
	Method        string
	Path          string // URL path, without the query (Claude Code adds ?beta=true)
	Header        http.Header
	Model         string
	Stream        bool
	// Tools are the names of the tools offered.
	Tools    []string
	Messages []AnthropicMessage
	Body     []byte
	// Side marks requests answered without consuming a turn.
	Side bool
	// Turn is the index of the scripted turn answered; -1 for side
	// requests, other endpoints and requests past the end of the script.
	Turn int
	// Retry is true when the request repeated the previous scripted
	// request's conversation in the same Claude Code session and was
	// answered with its turn again (see lastTurn).
	Retry bool
}

// AnthropicMessage is one message of a request, with its content blocks.
type AnthropicMessage struct {
	Role   string
	Blocks []AnthropicBlock
}

// AnthropicBlock is one content block of a request message.
type AnthropicBlock struct {
	Type      string // text, tool_use, tool_result, ...
	Text      string // text; tool_result content flattened to text
	ToolUseID string // tool_result: the call it answers; tool_use: its id
	Name      string // tool_use
	Input     json.RawMessage
	IsError   bool // tool_result
	// Images are the decoded base64 image blocks (of a tool_result: the
	// images the tool returned, a browser's screenshot).
	Images [][]byte
}

// ToolResults returns the tool_result blocks of the request's last message.
func (r AnthropicRequest) ToolResults() []AnthropicBlock {
	if len(r.Messages) == 0 {
		return nil
	}
	var out []AnthropicBlock
	for _, b := range r.Messages[len(r.Messages)-1].Blocks {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// UserText returns the text blocks of all user messages, joined.
func (r AnthropicRequest) UserText() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// AnthropicServer is a scripted Anthropic Messages API server.
type AnthropicServer struct {
	// URL is the base URL for ANTHROPIC_BASE_URL (no /v1).
	URL string

	srv      *http.Server
	ln       net.Listener
	stop     chan struct{}
	stopOnce sync.Once

	mu        sync.Mutex
	script    AnthropicScript
	next      int
	requests  []AnthropicRequest
	exhausted int
	ids       int
	last      lastTurn
}

// NewAnthropic starts a server on addr ("127.0.0.1:0" for any free port;
// the docker0 gateway address when a container must reach it). Close it
// when done.
func NewAnthropic(addr string, script AnthropicScript) (*AnthropicServer, error) {
	for i, t := range script.Turns {
		for _, tu := range t.ToolUses {
			if _, err := anthropicInput(tu.Input); err != nil {
				return nil, fmt.Errorf("modeltest: anthropic script turn %d, tool %s: %w", i, tu.Name, err)
			}
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("modeltest: anthropic server: listen on %s: %w", addr, err)
	}
	s := &AnthropicServer{
		URL:  "http://" + ln.Addr().String(),
		ln:   ln,
		stop: make(chan struct{}),
	}
	s.script = script
	s.script.Turns = append([]AnthropicTurn(nil), script.Turns...)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.countTokens)
	mux.HandleFunc("/", s.other)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns on Close
	return s, nil
}

// StartAnthropic starts a server on loopback and closes it when the test
// ends.
func StartAnthropic(t testing.TB, script AnthropicScript) *AnthropicServer {
	t.Helper()
	s, err := NewAnthropic("127.0.0.1:0", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Addr is the host:port the server listens on.
func (s *AnthropicServer) Addr() string { return s.ln.Addr().String() }

// Env returns the variables that point Claude Code at this server.
func (s *AnthropicServer) Env() []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + s.URL,
		// Any key works; this one is obviously not a real secret.
		"ANTHROPIC_API_KEY=sk-ant-scripted-test-key",
	}
}

// Close releases stalled streams and stops the server.
func (s *AnthropicServer) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
}

// Append adds turns to the end of the script.
func (s *AnthropicServer) Append(turns ...AnthropicTurn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script.Turns = append(s.script.Turns, turns...)
}

// Requests returns every request received so far, in order.
func (s *AnthropicServer) Requests() []AnthropicRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AnthropicRequest(nil), s.requests...)
}

// ScriptedRequests returns the requests that consumed a turn, one per
// turn served, in order: a client's retry of a response it gave up on
// (Retry, answered with the same turn: Claude Code's stream watchdog
// retries a slow first byte or a stalled stream on a loaded machine)
// carries the same conversation and is left out, so index i is turn i
// however often the agent retried. Requests has them all.
func (s *AnthropicServer) ScriptedRequests() []AnthropicRequest {
	var out []AnthropicRequest
	for _, r := range s.Requests() {
		if r.Turn >= 0 && !r.Retry {
			out = append(out, r)
		}
	}
	return out
}

// Served is the number of scripted turns played so far.
func (s *AnthropicServer) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// Exhausted counts conversation requests that arrived after the script ran
// out; they are answered with a short final text so the agent ends instead
// of hanging.
func (s *AnthropicServer) Exhausted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exhausted
}

// WaitServed blocks until at least n scripted turns were served.
func (s *AnthropicServer) WaitServed(ctx context.Context, n int) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for s.Served() < n {
		select {
		case <-ctx.Done():
			return ErrNoTurn
		case <-tick.C:
		}
	}
	return nil
}

// anthropicRequestBody is the part of a Messages request the server reads.
type anthropicRequestBody struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *AnthropicServer) record(r *http.Request, body []byte) AnthropicRequest {
	h := r.Header.Clone()
	h.Del("X-Api-Key")
	h.Del("Authorization")
	return AnthropicRequest{
		Time:          time.Now(),
		APIKey:        r.Header.Get("X-Api-Key"),
		Authorization: r.Header.Get("Authorization"),
		Method:        r.Method,
		Path:          r.URL.Path,
		Header:        h,
		Body:          body,
		Turn:          -1,
	}
}

func (s *AnthropicServer) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		anthropicWriteError(w, &AnthropicError{Status: http.StatusBadRequest, Message: "reading body: " + err.Error()})
		return
	}
	rec := s.record(r, body)
	var req anthropicRequestBody
	if err := json.Unmarshal(body, &req); err != nil {
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		anthropicWriteError(w, &AnthropicError{Status: http.StatusBadRequest, Message: "scripted server: bad JSON body: " + err.Error()})
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	for _, m := range req.Messages {
		rec.Messages = append(rec.Messages, AnthropicMessage{Role: m.Role, Blocks: anthropicBlocks(m.Content)})
	}

	// A request without tools is not the agent's loop: Claude Code sends
	// those for titles, summaries and probes. They must not eat a turn.
	rec.Side = len(rec.Tools) == 0
	key := newRetryKey(r.Header.Get("X-Claude-Code-Session-Id"), rec.Messages)
	var turn AnthropicTurn
	s.mu.Lock()
	switch {
	case rec.Side:
		turn = AnthropicTurn{Text: s.script.SideText, Usage: AnthropicUsage{InputTokens: 10, OutputTokens: 2}}
		if turn.Text == "" {
			turn.Text = "OK"
		}
	case s.last.repeatedBy(key):
		rec.Turn, rec.Retry = s.last.turn, true
		turn = s.script.Turns[s.last.turn]
	case s.next < len(s.script.Turns):
		turn = s.script.Turns[s.next]
		rec.Turn = s.next
		if turn.plain() {
			s.last = lastTurn{key: key, turn: s.next}
		}
		s.next++
	default:
		s.exhausted++
		turn = AnthropicTurn{Text: "The scripted conversation has ended.", Usage: AnthropicUsage{InputTokens: 10, OutputTokens: 8}}
	}
	s.ids++
	msgID := fmt.Sprintf("msg_scripted_%04d", s.ids)
	s.requests = append(s.requests, rec)
	s.mu.Unlock()

	if turn.Error != nil {
		anthropicWriteError(w, turn.Error)
		return
	}
	model := req.Model
	if model == "" {
		model = AnthropicModelID
	}
	if !req.Stream {
		anthropicWriteJSON(w, http.StatusOK, s.message(msgID, model, turn))
		return
	}
	s.stream(w, r, msgID, model, turn)
}

// countTokens answers the token-counting endpoint with a rough count, so
// a CLI that asks before compacting gets an answer.
func (s *AnthropicServer) countTokens(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, s.record(r, body))
	s.mu.Unlock()
	anthropicWriteJSON(w, http.StatusOK, map[string]any{"input_tokens": len(body)/4 + 1})
}

// other answers every other endpoint: HEAD/GET probes get 200 with an
// empty object so start-up checks pass; the rest a 404 in the API's error
// shape. All are recorded, which is how a test finds out what the CLI
// calls.
func (s *AnthropicServer) other(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, s.record(r, body))
	s.mu.Unlock()
	if r.Method == http.MethodHead || r.Method == http.MethodGet {
		anthropicWriteJSON(w, http.StatusOK, map[string]any{})
		return
	}
	anthropicWriteError(w, &AnthropicError{Status: http.StatusNotFound,
		Message: fmt.Sprintf("scripted server: no %s %s", r.Method, r.URL.Path)})
}
