// Package modeltest holds scripted model servers for tests: an
// OpenAI-compatible chat-completions endpoint (this file) that the real
// OpenCode CLI talks to, and an Anthropic Messages endpoint for Claude Code.
// A test writes the conversation as a list of turns; the server plays them
// back in order, streaming them the way a real provider does, so the agent
// CLI runs its real tool loop (it really edits files) without a network.
package modeltest

import (
	"context"
	"fmt"
	"net"
	"net/http"
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
	// Gate, when set, holds the answer until it is closed: a test keeps a
	// run alive at a known point for as long as it needs, and lets it go
	// on when it is done looking.
	Gate <-chan struct{}
	// Status, when not 0 or 200, answers with that HTTP status and an
	// OpenAI-style error body instead of a stream.
	Status int
}

// plain is a turn answered at once and in full: the only kind a repeated
// request gets again (see lastTurn).
func (t Turn) plain() bool {
	return !t.Stall && t.Delay == 0 && (t.Status == 0 || t.Status == http.StatusOK)
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
	// Retry is true when the request repeated the previous scripted
	// request's conversation in the same session and was answered with its
	// turn again.
	Retry bool
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
	last      lastTurn
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

// ScriptedRequests returns the requests that consumed a turn, one per
// turn served, in order: a client's retry of a response it gave up on
// (Retry, answered with the same turn: Claude Code's stream watchdog
// retries a slow first byte or a stalled stream on a loaded machine)
// carries the same conversation and is left out, so index i is turn i
// however often the agent retried. Requests has them all.
func (s *Server) ScriptedRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Turn >= 0 && !r.Retry {
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
